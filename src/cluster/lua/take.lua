-- Take: a free lease, or one this node id already holds (a restarted node reclaims its shards at
-- once instead of waiting for its old leases to expire; the token raise that follows fences its
-- previous incarnation).
-- KEYS     the shards' lease keys
-- ARGV[1]  this node's id
-- ARGV[2]  the lease in milliseconds
-- Returns  per key: 1 taken, 0 held by another node
local out = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder == false or holder == ARGV[1] then
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
