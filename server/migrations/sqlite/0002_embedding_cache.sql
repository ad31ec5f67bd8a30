-- Embeddings already computed, so only missing vectors are computed again. Keys are
-- "{message_id}:{content_hash}" for messages and the content hash for agent-item chunks.
CREATE TABLE embedding_cache (
    model      TEXT NOT NULL,
    cache_key  TEXT NOT NULL,
    -- Little-endian f32 values.
    vector     BLOB NOT NULL,
    PRIMARY KEY (model, cache_key)
);
