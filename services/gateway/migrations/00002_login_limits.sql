-- +goose Up
-- Login limits by client as well as by address (issue 24): a stranger failing codes for an
-- address must lock out only themselves, and code requests are counted per client too.
--
-- login_attempts.client is the caller's address as the limits key it (an IP address, no
-- port; behind a trusted proxy the client it vouches for); peer stays the audit's fuller
-- story ("<client> via <proxy>").
ALTER TABLE login_attempts ADD COLUMN client TEXT NOT NULL DEFAULT '';
CREATE INDEX login_attempts_client ON login_attempts (client, time DESC) WHERE client <> '';

-- login_lockouts gets a row per (address, client): failures from one client lock that
-- client out of the address. The row with client '' is the address-wide ceiling, counting
-- every client's failures against a much higher threshold (a distributed guesser is still
-- bounded); the rows that existed become those.
ALTER TABLE login_lockouts ADD COLUMN client TEXT NOT NULL DEFAULT '';
ALTER TABLE login_lockouts ALTER COLUMN client DROP DEFAULT;
ALTER TABLE login_lockouts DROP CONSTRAINT login_lockouts_pkey;
ALTER TABLE login_lockouts ADD PRIMARY KEY (email_norm, client);

-- +goose Down
DELETE FROM login_lockouts WHERE client <> '';
ALTER TABLE login_lockouts DROP CONSTRAINT login_lockouts_pkey;
ALTER TABLE login_lockouts DROP COLUMN client;
ALTER TABLE login_lockouts ADD PRIMARY KEY (email_norm);
DROP INDEX login_attempts_client;
ALTER TABLE login_attempts DROP COLUMN client;
