-- wrk request generator: a different random scenario on every request, so a figure measures the
-- work and not a cache keyed on the scenario. ZERO3_PATH and ZERO3_HX come from the environment.
local path = os.getenv("ZERO3_PATH") or "/api/estimate"
local headers = {}
if os.getenv("ZERO3_HX") == "1" then headers["HX-Request"] = "true" end
local widths = {1, 2, 4}
local masters = {0, 4, 8}

math.randomseed(tonumber(os.getenv("ZERO3_SEED") or "1"))

request = function()
  local params = math.random(1, 200000) * 1000000            -- 1M … 200B parameters
  local q = string.format(
    "params=%d&dp=%d&param_bytes=%d&master_bytes=%d&opt_states=%d&unit_params=%d&prefetch=%d"
      .. "&activation_bytes=%dGB&capacity_bytes=%dGiB&contingency_pct=%d",
    params, math.random(1, 4096), widths[math.random(1, 3)], masters[math.random(1, 3)],
    math.random(0, 4), math.random(0, params), math.random(0, 8),
    math.random(0, 60), math.random(16, 192), math.random(0, 20))
  return wrk.format("GET", path .. "?" .. q, headers)
end
