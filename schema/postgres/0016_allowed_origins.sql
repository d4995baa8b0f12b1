-- Browser origins a tenant's pages call the API from (`cohort tenants set --allowed-origins`):
-- answers to requests made with its public key or session tokens are readable (CORS) only by pages
-- of these origins. Empty: any origin. Each is a normalized scheme://host[:port].
ALTER TABLE tenants ADD COLUMN allowed_origins TEXT[] NOT NULL DEFAULT '{}';
