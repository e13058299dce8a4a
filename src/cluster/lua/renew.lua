-- Renew: a new TTL on every lease still held by this node.
-- KEYS     the shards' lease keys
-- ARGV[1]  this node's id
-- ARGV[2]  the lease in milliseconds
-- Returns  per key: 1 renewed, 0 the lease is someone else's or gone
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
