/**
 * The ledger schema, as numbered migrations applied in order at start-up. Each applied
 * version is recorded in `schema_migrations`; a database with a version this build does
 * not know is refused rather than guessed at. Never edit a released migration: add one.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: 'jobs, attempts and outbox',
    sql: `
      CREATE TABLE jobs (
        seq              INTEGER PRIMARY KEY,
        id               TEXT    NOT NULL UNIQUE,
        tenant           TEXT    NOT NULL,
        type             TEXT    NOT NULL,
        input            TEXT    NOT NULL,
        requires         TEXT    NOT NULL,
        idempotency_key  TEXT,
        state            TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'finished', 'failed')),
        attempt          INTEGER NOT NULL CHECK (attempt >= 1),
        max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
        not_before       INTEGER NOT NULL,
        redispatch_at    INTEGER,
        lease_token      TEXT,
        lease_holder     TEXT,
        lease_deadline   INTEGER,
        cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
        progress         REAL,
        progress_message TEXT,
        result           TEXT,
        failure_reason   TEXT CHECK (failure_reason IN ('permanent', 'exhausted', 'cancelled', 'unroutable')),
        error_class      TEXT CHECK (error_class IN ('permanent', 'transient', 'fatal')),
        error_code       TEXT,
        error_message    TEXT,
        created_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        started_at       INTEGER,
        ended_at         INTEGER,
        CHECK (attempt <= max_attempts),
        CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_deadline IS NOT NULL)),
        CHECK ((state IN ('finished', 'failed')) = (ended_at IS NOT NULL)),
        CHECK ((state = 'failed') = (failure_reason IS NOT NULL)),
        CHECK (state <> 'queued' OR redispatch_at IS NOT NULL)
      );

      CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL;
      -- The sweeper's two questions, each answered from an index of what is due.
      CREATE INDEX jobs_lease_due ON jobs (lease_deadline) WHERE state = 'running';
      CREATE INDEX jobs_redispatch_due ON jobs (redispatch_at) WHERE state = 'queued';
      CREATE INDEX jobs_tenant_listing ON jobs (tenant, seq);
      CREATE INDEX jobs_state_listing ON jobs (state, seq);

      -- The state machine, enforced by the database as well as by every operation.
      CREATE TRIGGER jobs_state_edges BEFORE UPDATE OF state ON jobs
      WHEN OLD.state <> NEW.state AND NOT (
           (OLD.state = 'queued'  AND NEW.state IN ('running', 'failed'))
        OR (OLD.state = 'running' AND NEW.state IN ('queued', 'finished', 'failed'))
      )
      BEGIN
        SELECT RAISE(ABORT, 'planrun ledger: illegal job state transition');
      END;

      CREATE TRIGGER jobs_terminal_frozen BEFORE UPDATE ON jobs
      WHEN OLD.state IN ('finished', 'failed')
      BEGIN
        SELECT RAISE(ABORT, 'planrun ledger: a terminal job never changes');
      END;

      CREATE TRIGGER jobs_attempt_grows BEFORE UPDATE OF attempt ON jobs
      WHEN NEW.attempt < OLD.attempt
      BEGIN
        SELECT RAISE(ABORT, 'planrun ledger: attempts only grow');
      END;

      CREATE TABLE attempts (
        job_id     TEXT    NOT NULL REFERENCES jobs (id),
        attempt    INTEGER NOT NULL,
        worker     TEXT    NOT NULL,
        started_at INTEGER NOT NULL,
        ended_at   INTEGER,
        outcome    TEXT CHECK (outcome IN ('finished', 'failed', 'retried', 'expired', 'cancelled')),
        error      TEXT,
        PRIMARY KEY (job_id, attempt),
        CHECK ((ended_at IS NULL) = (outcome IS NULL))
      ) WITHOUT ROWID;

      CREATE TABLE outbox (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        kind         TEXT    NOT NULL CHECK (kind IN ('work', 'result')),
        job_id       TEXT    NOT NULL REFERENCES jobs (id),
        body         TEXT    NOT NULL,
        created_at   INTEGER NOT NULL,
        available_at INTEGER NOT NULL,
        sent_at      INTEGER
      );

      CREATE INDEX outbox_unsent ON outbox (id) WHERE sent_at IS NULL;
      CREATE INDEX outbox_by_job ON outbox (job_id, kind);
      -- One result-or-failure message per job, whatever races happen above.
      CREATE UNIQUE INDEX outbox_one_result ON outbox (job_id) WHERE kind = 'result';
    `,
  },
  {
    version: 2,
    name: 'the proof of who holds a lease',
    sql: `
      -- A digest of the holding worker process's secret: a regrant needs it, not just the holder's public name.
      ALTER TABLE jobs ADD COLUMN lease_proof TEXT;
    `,
  },
  {
    version: 3,
    name: "attempt outcome 'released'",
    // SQLite cannot change a CHECK in place: the attempts table is copied into a new one.
    sql: `
      CREATE TABLE attempts_v2 (
        job_id     TEXT    NOT NULL REFERENCES jobs (id),
        attempt    INTEGER NOT NULL,
        worker     TEXT    NOT NULL,
        started_at INTEGER NOT NULL,
        ended_at   INTEGER,
        outcome    TEXT CHECK (outcome IN ('finished', 'failed', 'retried', 'expired', 'released', 'cancelled')),
        error      TEXT,
        PRIMARY KEY (job_id, attempt),
        CHECK ((ended_at IS NULL) = (outcome IS NULL))
      ) WITHOUT ROWID;
      INSERT INTO attempts_v2 SELECT job_id, attempt, worker, started_at, ended_at, outcome, error FROM attempts;
      DROP TABLE attempts;
      ALTER TABLE attempts_v2 RENAME TO attempts;
    `,
  },
  {
    version: 4,
    name: 'outbox rows set aside',
    sql: `
      -- A row the relay can never publish (issue 18) leaves the outbox like a sent one
      -- (sent_at), with the reason it was set aside instead; a sent row has none.
      ALTER TABLE outbox ADD COLUMN set_aside_reason TEXT;
    `,
  },
  {
    version: 5,
    name: 'attempts handed upload URLs',
    sql: `
      -- Each attempt the fence handed presigned upload URLs (the S3 store), written before
      -- the URLs are handed out: the store cleaner's work list (issue 11). valid_until is
      -- when the last of them stops working; a row is closed once the attempt's objects
      -- are removed (it lost) or kept (it is the delivered one). claimed_until keeps two
      -- orchestrators from taking the same row at once.
      CREATE TABLE upload_grants (
        job_id        TEXT    NOT NULL REFERENCES jobs (id),
        attempt       INTEGER NOT NULL,
        signed_at     INTEGER NOT NULL,
        valid_until   INTEGER NOT NULL,
        claimed_until INTEGER,
        closed_at     INTEGER,
        outcome       TEXT CHECK (outcome IN ('removed', 'delivered')),
        PRIMARY KEY (job_id, attempt),
        CHECK ((closed_at IS NULL) = (outcome IS NULL))
      ) WITHOUT ROWID;
      CREATE INDEX upload_grants_open ON upload_grants (valid_until) WHERE closed_at IS NULL;
    `,
  },
  {
    version: 6,
    name: 'run timeout per job',
    sql: `
      -- timeoutSeconds of a submission (issue 13): how long one run may take; NULL leaves it
      -- to the job type's or the worker's default.
      ALTER TABLE jobs ADD COLUMN timeout_seconds INTEGER;
    `,
  },
  {
    version: 7,
    name: 'several orchestrators on one ledger',
    sql: `
      -- An outbox row a relay took to publish is claimed until claimed_until (issue 12), so
      -- that the relays of other orchestrators take other rows; a claim that runs out, its
      -- relay gone, is taken again.
      ALTER TABLE outbox ADD COLUMN claimed_until INTEGER;

      -- The fleet: each worker's last heartbeat (issue 12), so that every orchestrator routes
      -- by and shows the same fleet. proof is the digest of the worker process's secret that
      -- holds the name while it is heard from (issue 18); the JSON columns are its report.
      CREATE TABLE fleet (
        worker         TEXT    PRIMARY KEY,
        proof          TEXT    NOT NULL,
        job_types      TEXT    NOT NULL,
        capabilities   TEXT    NOT NULL,
        held_back      TEXT    NOT NULL,
        slots          INTEGER NOT NULL CHECK (slots >= 0),
        running        INTEGER NOT NULL CHECK (running >= 0),
        last_heartbeat INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX fleet_heard ON fleet (last_heartbeat);
    `,
  },
  {
    version: 8,
    name: 'resource limits per job',
    sql: `
      -- limits of a submission (issue 13): { memoryMb?, processes? } of one run, as JSON; NULL
      -- leaves them to the job type's. The worker enforces the lower of these and the type's.
      ALTER TABLE jobs ADD COLUMN limits TEXT;
    `,
  },
  {
    version: 9,
    name: 'API keys in the ledger',
    sql: `
      -- API keys (issue 12), here rather than in a keys.db of each orchestrator's data folder,
      -- so that every orchestrator sharing the ledger accepts the same keys and refuses a
      -- revoked one at its next request. key_sha256 is the digest of the key, which is
      -- stored nowhere; an admin key names no tenant. A keys.db of an older planrun is
      -- imported once at start-up (src/keys/key-file-import.ts).
      CREATE TABLE api_keys (
        id           TEXT    PRIMARY KEY,
        kind         TEXT    NOT NULL CHECK (kind IN ('tenant', 'admin')),
        tenant       TEXT,
        key_sha256   TEXT    NOT NULL UNIQUE,
        prefix       TEXT    NOT NULL,
        created_at   INTEGER NOT NULL,
        last_used_at INTEGER,
        revoked_at   INTEGER,
        CHECK ((kind = 'admin') = (tenant IS NULL))
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 10,
    name: 'job logs',
    sql: `
      -- Each attempt's log (issue 14): its lines in chunks, one per batch a worker sent, of
      -- its head (the first 64 KiB, kept) or its tail (the oldest pruned past 1 MiB), and a
      -- summary row with where the head ends and what was dropped. Pruning deletes whole
      -- chunks by key range, so keeping the tail never rewrites it.
      CREATE TABLE attempt_logs (
        job_id        TEXT    NOT NULL REFERENCES jobs (id),
        attempt       INTEGER NOT NULL,
        head_bytes    INTEGER  NOT NULL,
        head_closed   INTEGER NOT NULL CHECK (head_closed IN (0, 1)),
        tail_bytes    INTEGER  NOT NULL,
        dropped_bytes INTEGER  NOT NULL,
        dropped_lines INTEGER  NOT NULL,
        next_seq      INTEGER NOT NULL,
        updated_at    INTEGER  NOT NULL,
        PRIMARY KEY (job_id, attempt)
      ) WITHOUT ROWID;
      CREATE TABLE log_chunks (
        job_id     TEXT    NOT NULL,
        attempt    INTEGER NOT NULL,
        seq        INTEGER NOT NULL,
        section    TEXT    NOT NULL CHECK (section IN ('head', 'tail')),
        bytes      INTEGER  NOT NULL,
        line_count INTEGER NOT NULL,
        lines      TEXT    NOT NULL,
        PRIMARY KEY (job_id, attempt, seq)
      );

      -- The last lines of a failed attempt's log, as its worker put them in the error (error.logTail).
      ALTER TABLE jobs ADD COLUMN error_log_tail TEXT;
    `,
  },
  {
    version: 11,
    name: 'redrive, the holding area, metrics by type and retention',
    sql: `
      -- Redrive (issue 14): a new job made from a failed one names it here, so each keeps its
      -- own result message and the old failure stays. job_id is the failed job (retried at
      -- most once: the primary key), retry_id the job made from it. No foreign keys: the
      -- retention pass prunes the older one first, and the newer keeps the id it was made
      -- from; the row goes when the job made from it is pruned.
      CREATE TABLE job_retries (
        job_id     TEXT    PRIMARY KEY,
        retry_id   TEXT    NOT NULL UNIQUE,
        created_at INTEGER NOT NULL
      ) WITHOUT ROWID;

      -- Ended jobs by when they ended: the holding area's time range, the bulk redrive's,
      -- and the retention pass's cut-off.
      CREATE INDEX jobs_ended ON jobs (ended_at) WHERE ended_at IS NOT NULL;

      -- Queued and running jobs by type and tenant, read by every metrics scrape without
      -- touching the table.
      CREATE INDEX jobs_active ON jobs (state, type, tenant, not_before) WHERE state IN ('queued', 'running');
    `,
  },
  {
    version: 12,
    name: 'dispatch from the ledger',
    sql: `
      -- Fair dispatch (issue 15): a queued job's work message is released by the dispatcher,
      -- which records the attempt it released it for; a queued job whose attempt differs is
      -- waiting for the dispatcher and has no message in flight. Jobs queued before this
      -- migration had their work message published at submit.
      ALTER TABLE jobs ADD COLUMN dispatched_attempt INTEGER;
      UPDATE jobs SET dispatched_attempt = attempt WHERE state = 'queued';
      -- Higher first within a tenant's share; a concurrency key caps the live leases of the
      -- tenant's jobs that carry it at concurrency_limit.
      ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;
      ALTER TABLE jobs ADD COLUMN concurrency_limit INTEGER CHECK (concurrency_limit >= 1);
      -- The dispatcher's two questions: which queued jobs wait for it (by type, tenant and
      -- order of release), and which hold capacity without a lease yet.
      CREATE INDEX jobs_waiting ON jobs (type, tenant, priority DESC, seq) WHERE state = 'queued';
      CREATE INDEX jobs_dispatched ON jobs (type) WHERE state = 'queued' AND dispatched_attempt = attempt;

      -- Each tenant's weight in the fair share (planrun tenants set NAME --weight W); 1 when absent.
      CREATE TABLE tenant_weights (
        tenant TEXT PRIMARY KEY,
        weight INTEGER NOT NULL CHECK (weight >= 1)
      ) WITHOUT ROWID;
      -- Live leases allowed at once per tenant, per job type or per (tenant, type): '' in
      -- tenant or type stands for any (both '' is not a limit anyone sets).
      CREATE TABLE running_limits (
        tenant      TEXT NOT NULL,
        type        TEXT NOT NULL,
        max_running INTEGER NOT NULL CHECK (max_running >= 0),
        PRIMARY KEY (tenant, type),
        CHECK (tenant <> '' OR type <> '')
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 13,
    name: 'abandoned grants',
    sql: `
      -- A grant its worker never took up (the answer came after the worker stopped waiting)
      -- is taken back at grant_abandoned_at unless its holder renews, reports progress or
      -- settles first (which clears it): the job goes back to queued at the same attempt
      -- (edge abandon, docs/state-machine.md) instead of holding a slot for a whole TTL.
      ALTER TABLE jobs ADD COLUMN grant_abandoned_at INTEGER;
      CREATE INDEX jobs_grant_unconfirmed ON jobs (grant_abandoned_at) WHERE state = 'running' AND grant_abandoned_at IS NOT NULL;
    `,
  },
];
