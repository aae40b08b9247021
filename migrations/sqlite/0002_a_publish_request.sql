-- A publish request on a draft: set when an author asks to publish; the
-- self-test job publishes the draft when it passes and clears the request
-- either way.
ALTER TABLE packet_versions ADD COLUMN publish_requested_at INTEGER;
