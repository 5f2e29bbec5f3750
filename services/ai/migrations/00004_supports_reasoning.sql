-- Whether a model can think before it answers (Anthropic extended thinking, OpenAI
-- reasoning_effort, Gemini thinkingConfig). The engine sends a call's reasoning effort only to
-- models that have it, so a provider never gets a setting its model rejects.
--
-- The defaults follow the providers' documentation for the models this catalogue seeds and
-- for those an admin may have added by their provider names: Claude 4.x (Haiku 4.5
-- included) and Claude 3.7 Sonnet; OpenAI's o-series and GPT-5 (not o1-mini and
-- o1-preview, which refuse reasoning_effort, nor the gpt-5 chat aliases); Gemini 2.5 and
-- later (not its image, audio, live or TTS variants). GPT-4o and GPT-4.1, Gemini 2.0 and
-- the OpenAI-compatible servers' models (Moonshot, Ollama) have it off; admins turn it on
-- with UpdateModel.

-- +goose Up
ALTER TABLE models ADD COLUMN supports_reasoning BOOLEAN NOT NULL DEFAULT false;

UPDATE models m SET supports_reasoning = true
FROM providers p
WHERE m.provider_id = p.id
    AND m.embedding_dimensions = 0 AND NOT ('embedding' = ANY (m.tags))
    AND (
        (p.kind = 'anthropic' AND m.name ~ '^claude-((opus|sonnet|haiku)-4|3-7-sonnet)')
        OR (p.kind = 'openai' AND m.name ~ '^(o1|o3|o4-mini|gpt-5)($|-)'
            AND m.name !~ '^o1-(mini|preview)' AND m.name !~ '-chat')
        OR (p.kind = 'gemini' AND m.name ~ '^(models/)?gemini-(2\.5|[3-9])'
            AND m.name !~ '(image|audio|live|tts)')
    );

-- +goose Down
ALTER TABLE models DROP COLUMN supports_reasoning;
