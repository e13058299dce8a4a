-- Heartbeat: this node's expiry on Redis's clock; expired members dropped.
-- KEYS[1]  the members sorted set
-- ARGV[1]  this node's id
-- ARGV[2]  milliseconds until this node counts as gone
-- Returns  the live members' ids
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)
