-- Release: delete the leases still held by this node.
-- KEYS     the shards' lease keys
-- ARGV[1]  this node's id
-- Returns  how many were released
local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('DEL', key)
    n = n + 1
  end
end
return n
