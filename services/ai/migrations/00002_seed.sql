-- The catalogue a fresh installation starts with: the seed document's providers and models
-- (Anthropic, OpenAI, Moonshot, Google — named "gemini" after its API, the value
-- THEFOLD_AI_PROVIDER takes) plus current models, embedding models and a local
-- Ollama server. Prices are the providers' public list prices per million tokens, in
-- micro-dollars, as published when this was written; admins correct them with UpdateModel.
-- Cache prices: Anthropic reads at 0.1× and writes at 1.25× input; OpenAI reads at 0.5×
-- (gpt-4o family) or 0.25× (gpt-4.1 family) and writes at the input price; Gemini reads at
-- 0.25× and bills cache storage by time rather than writes (0: priced as input).
--
-- Keys come from the environment (env:NAME) and are never stored. Ollama is disabled: it
-- needs a local server, and nothing should call one that is not there. Enabling the provider
-- is enough to use its models.

-- +goose Up
INSERT INTO providers (name, kind, base_url, api_key_ref, enabled) VALUES
    ('anthropic', 'anthropic',         '',                          'env:ANTHROPIC_API_KEY', true),
    ('openai',    'openai',            '',                          'env:OPENAI_API_KEY',    true),
    ('gemini',    'gemini',            '',                          'env:GEMINI_API_KEY',    true),
    ('moonshot',  'openai_compatible', 'https://api.moonshot.ai/v1', 'env:MOONSHOT_API_KEY',  true),
    ('ollama',    'openai_compatible', 'http://localhost:11434/v1',  '',                      false);

INSERT INTO models (provider_id, name, display_name, tier,
        input_micros_per_mtok, output_micros_per_mtok, cache_read_micros_per_mtok, cache_write_micros_per_mtok,
        context_window, max_output_tokens, embedding_dimensions, tags, supports_tools, supports_vision, enabled)
SELECT p.id, v.name, v.display_name, v.tier, v.input, v.output, v.cache_read, v.cache_write,
        v.context_window, v.max_output, v.dims, v.tags::text[], v.tools, v.vision, v.enabled
FROM (VALUES
    -- provider, name, display name, tier, input, output, cache read, cache write,
    -- context window, max output, embedding dimensions, tags, tools, vision, enabled
    ('anthropic', 'claude-haiku-4-5',  'Claude Haiku 4.5',  2, 1000000,  5000000, 100000, 1250000, 200000, 64000, 0, '{chat,coding,analysis}',          true, true, true),
    ('anthropic', 'claude-sonnet-4-5', 'Claude Sonnet 4.5', 3, 3000000, 15000000, 300000, 3750000, 200000, 64000, 0, '{chat,coding,analysis,planning}', true, true, true),
    ('anthropic', 'claude-sonnet-4-6', 'Claude Sonnet 4.6', 4, 3000000, 15000000, 300000, 3750000, 200000, 64000, 0, '{chat,coding,analysis,planning}', true, true, true),
    ('anthropic', 'claude-opus-4-5',   'Claude Opus 4.5',   5, 5000000, 25000000, 500000, 6250000, 200000, 64000, 0, '{chat,coding,analysis,planning}', true, true, true),
    ('anthropic', 'claude-opus-4-6',   'Claude Opus 4.6',   5, 5000000, 25000000, 500000, 6250000, 200000, 64000, 0, '{chat,coding,analysis,planning}', true, true, true),

    ('openai', 'gpt-4o-mini',            'GPT-4o mini',            1,  150000,   600000,   75000,  150000,  128000, 16384,    0, '{chat,coding,analysis}',          true,  true,  true),
    ('openai', 'gpt-4.1-nano',           'GPT-4.1 nano',           1,  100000,   400000,   25000,  100000, 1047576, 32768,    0, '{chat,analysis}',                 true,  true,  true),
    ('openai', 'gpt-4.1-mini',           'GPT-4.1 mini',           2,  400000,  1600000,  100000,  400000, 1047576, 32768,    0, '{chat,coding,analysis}',          true,  true,  true),
    ('openai', 'gpt-4o',                 'GPT-4o',                 3, 2500000, 10000000, 1250000, 2500000,  128000, 16384,    0, '{chat,coding,analysis,planning}', true,  true,  true),
    ('openai', 'gpt-4.1',                'GPT-4.1',                3, 2000000,  8000000,  500000, 2000000, 1047576, 32768,    0, '{chat,coding,analysis,planning}', true,  true,  true),
    ('openai', 'text-embedding-3-small', 'Text Embedding 3 Small', 1,   20000,        0,       0,       0,    8191,     0, 1536, '{embedding}',                     false, false, true),
    ('openai', 'text-embedding-3-large', 'Text Embedding 3 Large', 1,  130000,        0,       0,       0,    8191,     0, 3072, '{embedding}',                     false, false, true),

    ('gemini', 'gemini-2.0-flash',     'Gemini 2.0 Flash',     1,  100000,   400000,  25000, 0, 1048576,  8192,    0, '{chat,coding,analysis}',          true,  true,  true),
    ('gemini', 'gemini-2.5-flash',     'Gemini 2.5 Flash',     2,  300000,  2500000,  75000, 0, 1048576, 65536,    0, '{chat,coding,analysis}',          true,  true,  true),
    ('gemini', 'gemini-2.5-pro',       'Gemini 2.5 Pro',       4, 1250000, 10000000, 312500, 0, 1048576, 65536,    0, '{chat,coding,analysis,planning}', true,  true,  true),
    -- The seed document's tier-5 Gemini was an experimental release that Google has since
    -- retired; it is kept for the record, disabled, priced like its successor 2.5 Pro.
    ('gemini', 'gemini-2.0-pro',       'Gemini 2.0 Pro',       5, 1250000, 10000000, 312500, 0, 2097152,  8192,    0, '{chat,coding,analysis,planning}', true,  true,  false),
    ('gemini', 'gemini-embedding-001', 'Gemini Embedding 001', 1,  150000,        0,      0, 0,    2048,     0, 3072, '{embedding}',                     false, false, true),

    ('moonshot', 'moonshot-v1-32k',      'Moonshot v1 32K',   1, 1000000, 3000000,      0, 0,  32768,  8192, 0, '{chat}',          true, false, true),
    ('moonshot', 'moonshot-v1-128k',     'Moonshot v1 128K',  1, 2000000, 5000000,      0, 0, 131072,  8192, 0, '{chat,analysis}', true, false, true),
    ('moonshot', 'kimi-k2-0905-preview', 'Kimi K2 (0905)',    3,  600000, 2500000, 150000, 0, 262144, 16384, 0, '{chat,coding}',   true, false, true),

    ('ollama', 'llama3.1:8b',       'Llama 3.1 8B (local)',       1, 0, 0, 0, 0, 131072, 4096,   0, '{chat,analysis}',        true,  false, true),
    ('ollama', 'qwen2.5-coder:7b',  'Qwen2.5 Coder 7B (local)',   1, 0, 0, 0, 0,  32768, 4096,   0, '{chat,coding}',          true,  false, true),
    ('ollama', 'qwen2.5-coder:32b', 'Qwen2.5 Coder 32B (local)',  2, 0, 0, 0, 0,  32768, 4096,   0, '{chat,coding,analysis}', true,  false, true),
    ('ollama', 'nomic-embed-text',  'Nomic Embed Text (local)',   1, 0, 0, 0, 0,   8192,    0, 768, '{embedding}',            false, false, true)
) AS v(provider, name, display_name, tier, input, output, cache_read, cache_write,
        context_window, max_output, dims, tags, tools, vision, enabled)
JOIN providers p ON p.name = v.provider;

-- +goose Down
-- Only the seeded rows: models and providers an admin added stay.
DELETE FROM models m USING providers p
WHERE m.provider_id = p.id AND (p.name, m.name) IN (VALUES
    ('anthropic', 'claude-haiku-4-5'), ('anthropic', 'claude-sonnet-4-5'), ('anthropic', 'claude-sonnet-4-6'),
    ('anthropic', 'claude-opus-4-5'), ('anthropic', 'claude-opus-4-6'),
    ('openai', 'gpt-4o-mini'), ('openai', 'gpt-4.1-nano'), ('openai', 'gpt-4.1-mini'), ('openai', 'gpt-4o'),
    ('openai', 'gpt-4.1'), ('openai', 'text-embedding-3-small'), ('openai', 'text-embedding-3-large'),
    ('gemini', 'gemini-2.0-flash'), ('gemini', 'gemini-2.5-flash'), ('gemini', 'gemini-2.5-pro'),
    ('gemini', 'gemini-2.0-pro'), ('gemini', 'gemini-embedding-001'),
    ('moonshot', 'moonshot-v1-32k'), ('moonshot', 'moonshot-v1-128k'), ('moonshot', 'kimi-k2-0905-preview'),
    ('ollama', 'llama3.1:8b'), ('ollama', 'qwen2.5-coder:7b'), ('ollama', 'qwen2.5-coder:32b'),
    ('ollama', 'nomic-embed-text'));
DELETE FROM providers p
WHERE p.name IN ('anthropic', 'openai', 'gemini', 'moonshot', 'ollama')
    AND NOT EXISTS (SELECT 1 FROM models m WHERE m.provider_id = p.id);
