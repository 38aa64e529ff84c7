-- Argo CD health check for fleetvm.io FleetVirtualMachine.
--
-- It reads the status the FleetVM hub controller writes and follows its
-- conditions; it never second-guesses them from the cluster list:
--   no status yet, or status older than the spec      -> Progressing
--   Degraded=True (a cluster failed or is unreachable) -> Degraded
--   Placed=False (no or not enough clusters qualify)   -> Degraded
--   Delivered=False with reason DeliveryFailed         -> Degraded
--   Ready=True and runStrategy Halted (stopped)        -> Suspended
--   Ready=True                                         -> Healthy
--   anything else (placement or delivery pending,
--   VMs provisioning, starting or stopping)            -> Progressing

local function condition(ctype)
  for _, c in ipairs(obj.status.conditions) do
    if c.type == ctype then
      return c
    end
  end
  return nil
end

local function result(status, c, fallback)
  local message = fallback
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    message = c.message
  end
  return { status = status, message = message }
end

if obj.status == nil or obj.status.conditions == nil then
  return result("Progressing", nil, "Waiting for the FleetVM hub controller to report status")
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  return result("Progressing", nil, "Waiting for the FleetVM hub controller to observe generation " .. generation)
end

local degraded = condition("Degraded")
if degraded ~= nil and degraded.status == "True" then
  return result("Degraded", degraded, "Degraded")
end

local placed = condition("Placed")
if placed ~= nil and placed.status == "False" then
  return result("Degraded", placed, "No cluster qualifies")
end

local delivered = condition("Delivered")
if delivered ~= nil and delivered.status == "False" and delivered.reason == "DeliveryFailed" then
  return result("Degraded", delivered, "Delivery failed")
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "True" then
  if obj.spec ~= nil and obj.spec.runStrategy == "Halted" then
    return result("Suspended", ready, "Stopped on every cluster (runStrategy Halted)")
  end
  return result("Healthy", ready, "Ready on every cluster")
end

if placed == nil or placed.status ~= "True" then
  return result("Progressing", placed, "Waiting for the placement decision")
end
if delivered == nil or delivered.status ~= "True" then
  return result("Progressing", delivered, "Waiting for Argo CD to create the Applications")
end
return result("Progressing", ready, "Waiting for the VM on every cluster")
