-- Who suspended a resource or a source through the API, and why: the
-- reason the caller gave (empty when none) and the caller's identity as
-- the audit trail names it (an API token's name, or oidc:<claim> for an
-- OpenID Connect ID token). Both are cleared when the suspension ends; a
-- suspension by an annotation or by the configuration records neither (the
-- annotation no8s.io/suspend-reason gives its own reason).
ALTER TABLE resources ADD COLUMN suspended_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE resources ADD COLUMN suspended_by_identity TEXT NOT NULL DEFAULT '';
ALTER TABLE sources ADD COLUMN suspended_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE sources ADD COLUMN suspended_by_identity TEXT NOT NULL DEFAULT '';
