-- Publishing: the design system of each tenant (one, created with defaults on first read) and the
-- page templates pages can be created from.

CREATE TABLE design_systems (
    id               BIGSERIAL   PRIMARY KEY,
    tenant_id        BIGINT      NOT NULL UNIQUE REFERENCES tenants (id) ON DELETE CASCADE,
    -- Hex colors, #rgb or #rrggbb, stored lower-case.
    primary_color    TEXT        NOT NULL CHECK (primary_color ~ '^#([0-9a-f]{3}|[0-9a-f]{6})$'),
    secondary_color  TEXT        NOT NULL CHECK (secondary_color ~ '^#([0-9a-f]{3}|[0-9a-f]{6})$'),
    background_color TEXT        NOT NULL CHECK (background_color ~ '^#([0-9a-f]{3}|[0-9a-f]{6})$'),
    text_color       TEXT        NOT NULL CHECK (text_color ~ '^#([0-9a-f]{3}|[0-9a-f]{6})$'),
    -- Font family names; the service refuses CSS syntax characters in them.
    heading_font     TEXT        NOT NULL CHECK (length(heading_font) BETWEEN 1 AND 100),
    body_font        TEXT        NOT NULL CHECK (length(body_font) BETWEEN 1 AND 100),
    -- A CSS length: 0, 8px, 0.5rem, 1em or 10%.
    border_radius    TEXT        NOT NULL CHECK (length(border_radius) BETWEEN 1 AND 16),
    spacing_unit     INT         NOT NULL CHECK (spacing_unit BETWEEN 0 AND 64),
    -- Appended after the tokens inside a <style> element; the service refuses what could end it.
    custom_css       TEXT        NOT NULL DEFAULT '' CHECK (octet_length(custom_css) <= 65536),
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Page templates: a named, tagged list of blocks (validated by the block registry) that a page can
-- be created from (POST /api/ai-pages/pages/ with template_id copies the blocks).
CREATE TABLE page_templates (
    id          BIGSERIAL   PRIMARY KEY,
    tenant_id   BIGINT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        TEXT        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description TEXT        NOT NULL DEFAULT '',
    blocks      JSONB       NOT NULL DEFAULT '[]',
    -- Lower-case, trimmed, unique per template.
    tags        TEXT[]      NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, id)
);
CREATE INDEX page_templates_tags_idx ON page_templates USING GIN (tags);
