-- pcache store: on-disk schema of `<directory>/store.db`.
--
-- The schema version lives in `PRAGMA user_version`.  This file holds the
-- complete current schema (section `create`, run on an empty database) and one
-- section per migration step (`migrate N`, which brings a version N-1
-- database to version N).  Sections start with a line `-- @section <name>`.
-- Statements run in order inside one `BEGIN IMMEDIATE` transaction, under the
-- store's file lock.  `pcache_log2(x)` is a function the store registers on
-- the migrating connection (not every SQLite build has log2()).
--
-- Never edit a released `migrate` section; add a new one and bump `create`.

-- @section create
-- version 3

-- One row per cached value.  Everything pcache queries is a real column; only
-- `extra` (free-form, JSON text) is not.  `id` changes on every put, so "the
-- row I read" can be told from "a newer put of the same key".
CREATE TABLE IF NOT EXISTS entries (
    id              INTEGER PRIMARY KEY,
    key             TEXT    NOT NULL UNIQUE,
    backend         TEXT    NOT NULL DEFAULT '',
    device_kind     TEXT    NOT NULL DEFAULT '',
    jax_version     TEXT    NOT NULL DEFAULT '',
    jaxlib_version  TEXT    NOT NULL DEFAULT '',
    function_name   TEXT    NOT NULL DEFAULT '',
    raw_size        INTEGER NOT NULL,            -- bytes given to put()
    stored_size     INTEGER NOT NULL,            -- bytes after the codec
    compile_seconds REAL    NOT NULL DEFAULT 0,
    created         REAL    NOT NULL,            -- unix time of the put
    last_used       REAL    NOT NULL,            -- unix time, coalesced
    hits            INTEGER NOT NULL DEFAULT 0,  -- coalesced
    codec           TEXT    NOT NULL,            -- 'zstd' or 'identity'
    checksum        TEXT    NOT NULL,            -- 'sha256:<hex>' of the raw bytes
    extra           TEXT    NOT NULL DEFAULT '{}',
    file            TEXT,                        -- side file under values/, NULL = inline in `blobs`
    cost_log        REAL    NOT NULL DEFAULT 0   -- log2(max(compile_seconds,1e-3) / max(stored_size,1))
);

-- Inline values live apart from the metadata so that scans of `entries`
-- (ls, gc, eviction) never page through value bytes.
CREATE TABLE IF NOT EXISTS blobs (
    id   INTEGER PRIMARY KEY,                    -- = entries.id
    data BLOB NOT NULL
);

-- Running totals, kept by the triggers below: len() and the size check before
-- eviction never scan.  Exactly one row, id = 0.
CREATE TABLE IF NOT EXISTS totals (
    id           INTEGER PRIMARY KEY CHECK (id = 0),
    entries      INTEGER NOT NULL DEFAULT 0,
    raw_bytes    INTEGER NOT NULL DEFAULT 0,
    stored_bytes INTEGER NOT NULL DEFAULT 0,
    file_bytes   INTEGER NOT NULL DEFAULT 0      -- part of stored_bytes kept in side files
);
INSERT OR IGNORE INTO totals (id) VALUES (0);

-- Persisted event counters: hits, misses, puts, evictions, corrupt, and any
-- name given to Store.bump().
CREATE TABLE IF NOT EXISTS counters (
    name  TEXT PRIMARY KEY,
    value NUMERIC NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Store-level facts: creation time, last orphan sweep.
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value TEXT
) WITHOUT ROWID;

-- Named, ordered lists of keys used together: a program's working set, so a
-- new process can load those values before it asks for them.  `keys` is a
-- JSON array of entry keys in first-use order.  Hints only: a key whose entry
-- is gone is skipped.
CREATE TABLE IF NOT EXISTS key_sets (
    name    TEXT PRIMARY KEY,
    keys    TEXT NOT NULL,
    updated REAL NOT NULL                        -- unix time of the last write
) WITHOUT ROWID;

-- Eviction orders (see store/_policy.py); each policy's ORDER BY matches one
-- of these exactly so culling reads victims straight off an index.
CREATE INDEX IF NOT EXISTS entries_last_used ON entries (last_used);
CREATE INDEX IF NOT EXISTS entries_created ON entries (created);
CREATE INDEX IF NOT EXISTS entries_cost ON entries ((last_used / 86400.0 + cost_log));

CREATE TRIGGER IF NOT EXISTS entries_ai AFTER INSERT ON entries BEGIN
    UPDATE totals SET
        entries      = entries + 1,
        raw_bytes    = raw_bytes + NEW.raw_size,
        stored_bytes = stored_bytes + NEW.stored_size,
        file_bytes   = file_bytes + (CASE WHEN NEW.file IS NULL THEN 0 ELSE NEW.stored_size END)
    WHERE id = 0;
END;

CREATE TRIGGER IF NOT EXISTS entries_ad AFTER DELETE ON entries BEGIN
    UPDATE totals SET
        entries      = entries - 1,
        raw_bytes    = raw_bytes - OLD.raw_size,
        stored_bytes = stored_bytes - OLD.stored_size,
        file_bytes   = file_bytes - (CASE WHEN OLD.file IS NULL THEN 0 ELSE OLD.stored_size END)
    WHERE id = 0;
    DELETE FROM blobs WHERE id = OLD.id;
END;

CREATE TRIGGER IF NOT EXISTS entries_au AFTER UPDATE OF raw_size, stored_size, file ON entries BEGIN
    UPDATE totals SET
        raw_bytes    = raw_bytes - OLD.raw_size + NEW.raw_size,
        stored_bytes = stored_bytes - OLD.stored_size + NEW.stored_size,
        file_bytes   = file_bytes
                       - (CASE WHEN OLD.file IS NULL THEN 0 ELSE OLD.stored_size END)
                       + (CASE WHEN NEW.file IS NULL THEN 0 ELSE NEW.stored_size END)
    WHERE id = 0;
END;

-- @section migrate 2
-- Version 1 had LRU eviction only: no cost column, no cost/created indexes,
-- no meta table and no side-file byte total.
ALTER TABLE entries ADD COLUMN cost_log REAL NOT NULL DEFAULT 0;
UPDATE entries SET cost_log =
    pcache_log2(max(compile_seconds, 0.001)) - pcache_log2(max(stored_size, 1));
CREATE INDEX IF NOT EXISTS entries_created ON entries (created);
CREATE INDEX IF NOT EXISTS entries_cost ON entries ((last_used / 86400.0 + cost_log));
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value TEXT
) WITHOUT ROWID;
ALTER TABLE totals ADD COLUMN file_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE totals SET file_bytes =
    (SELECT coalesce(sum(stored_size), 0) FROM entries WHERE file IS NOT NULL)
WHERE id = 0;
DROP TRIGGER IF EXISTS entries_ai;
DROP TRIGGER IF EXISTS entries_ad;
DROP TRIGGER IF EXISTS entries_au;
CREATE TRIGGER entries_ai AFTER INSERT ON entries BEGIN
    UPDATE totals SET
        entries      = entries + 1,
        raw_bytes    = raw_bytes + NEW.raw_size,
        stored_bytes = stored_bytes + NEW.stored_size,
        file_bytes   = file_bytes + (CASE WHEN NEW.file IS NULL THEN 0 ELSE NEW.stored_size END)
    WHERE id = 0;
END;
CREATE TRIGGER entries_ad AFTER DELETE ON entries BEGIN
    UPDATE totals SET
        entries      = entries - 1,
        raw_bytes    = raw_bytes - OLD.raw_size,
        stored_bytes = stored_bytes - OLD.stored_size,
        file_bytes   = file_bytes - (CASE WHEN OLD.file IS NULL THEN 0 ELSE OLD.stored_size END)
    WHERE id = 0;
    DELETE FROM blobs WHERE id = OLD.id;
END;
CREATE TRIGGER entries_au AFTER UPDATE OF raw_size, stored_size, file ON entries BEGIN
    UPDATE totals SET
        raw_bytes    = raw_bytes - OLD.raw_size + NEW.raw_size,
        stored_bytes = stored_bytes - OLD.stored_size + NEW.stored_size,
        file_bytes   = file_bytes
                       - (CASE WHEN OLD.file IS NULL THEN 0 ELSE OLD.stored_size END)
                       + (CASE WHEN NEW.file IS NULL THEN 0 ELSE NEW.stored_size END)
    WHERE id = 0;
END;

-- @section migrate 3
-- Version 2 had no working sets.
CREATE TABLE IF NOT EXISTS key_sets (
    name    TEXT PRIMARY KEY,
    keys    TEXT NOT NULL,
    updated REAL NOT NULL
) WITHOUT ROWID;
