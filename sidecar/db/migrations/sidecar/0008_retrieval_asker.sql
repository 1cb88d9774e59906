-- Who asked, as the forum says it: an opaque id (an HMAC or hash of the member's id, never the id
-- itself), optional. The zone calibration counts at most a few questions per asker, so that one
-- member cannot move the thresholds (sidecar/core/zone_guard.py).
ALTER TABLE sidecar_retrievals ADD COLUMN IF NOT EXISTS asker text;
