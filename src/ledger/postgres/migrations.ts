/**
 * The PostgreSQL ledger schema, as numbered migrations applied in order at start-up, all
 * pending ones in one transaction under an advisory lock (see database.ts). Each applied
 * version is recorded in `schema_migrations`; a schema with a version this build does not
 * know is refused rather than guessed at. Never edit a released migration: add one.
 *
 * It mirrors the SQLite schema (src/ledger/sqlite/migrations.ts) constraint for constraint:
 * the same CHECKs, the same partial indexes, and the state machine enforced by triggers
 * (plpgsql here). Times are epoch milliseconds in bigint columns, always written from the
 * ledger's injected clock, never from the database's now(). Structured values (input,
 * requires, result, errors, message bodies) are `json`, which keeps the exact text it was
 * given (so they round-trip as they do in SQLite, `\u0000` escapes included) and still
 * refuses malformed JSON.
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
        seq              bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id               text    NOT NULL UNIQUE,
        tenant           text    NOT NULL,
        type             text    NOT NULL,
        input            json    NOT NULL,
        requires         json    NOT NULL,
        idempotency_key  text,
        state            text    NOT NULL CHECK (state IN ('queued', 'running', 'finished', 'failed')),
        attempt          integer NOT NULL CHECK (attempt >= 1),
        max_attempts     integer NOT NULL CHECK (max_attempts >= 1),
        not_before       bigint  NOT NULL,
        redispatch_at    bigint,
        lease_token      text,
        lease_holder     text,
        lease_deadline   bigint,
        cancel_requested boolean NOT NULL DEFAULT false,
        progress         double precision,
        progress_message text,
        result           json,
        failure_reason   text CHECK (failure_reason IN ('permanent', 'exhausted', 'cancelled', 'unroutable')),
        error_class      text CHECK (error_class IN ('permanent', 'transient', 'fatal')),
        error_code       text,
        error_message    text,
        created_at       bigint  NOT NULL,
        updated_at       bigint  NOT NULL,
        started_at       bigint,
        ended_at         bigint,
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
      CREATE FUNCTION planrun_refuse_job_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        RAISE EXCEPTION 'planrun ledger: %', TG_ARGV[0]
          USING ERRCODE = 'integrity_constraint_violation',
                DETAIL = format('job %s: %s@%s -> %s@%s', OLD.id, OLD.state, OLD.attempt, NEW.state, NEW.attempt);
      END
      $fn$;

      CREATE TRIGGER jobs_state_edges BEFORE UPDATE OF state ON jobs
      FOR EACH ROW WHEN (OLD.state <> NEW.state AND NOT (
           (OLD.state = 'queued'  AND NEW.state IN ('running', 'failed'))
        OR (OLD.state = 'running' AND NEW.state IN ('queued', 'finished', 'failed'))
      ))
      EXECUTE FUNCTION planrun_refuse_job_update('illegal job state transition');

      CREATE TRIGGER jobs_terminal_frozen BEFORE UPDATE ON jobs
      FOR EACH ROW WHEN (OLD.state IN ('finished', 'failed'))
      EXECUTE FUNCTION planrun_refuse_job_update('a terminal job never changes');

      CREATE TRIGGER jobs_attempt_grows BEFORE UPDATE OF attempt ON jobs
      FOR EACH ROW WHEN (NEW.attempt < OLD.attempt)
      EXECUTE FUNCTION planrun_refuse_job_update('attempts only grow');

      CREATE TABLE attempts (
        job_id     text    NOT NULL REFERENCES jobs (id),
        attempt    integer NOT NULL,
        worker     text    NOT NULL,
        started_at bigint  NOT NULL,
        ended_at   bigint,
        outcome    text CHECK (outcome IN ('finished', 'failed', 'retried', 'expired', 'cancelled')),
        error      json,
        PRIMARY KEY (job_id, attempt),
        CHECK ((ended_at IS NULL) = (outcome IS NULL))
      );

      CREATE TABLE outbox (
        id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        kind         text   NOT NULL CHECK (kind IN ('work', 'result')),
        job_id       text   NOT NULL REFERENCES jobs (id),
        body         json   NOT NULL,
        created_at   bigint NOT NULL,
        available_at bigint NOT NULL,
        sent_at      bigint
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
      ALTER TABLE jobs ADD COLUMN lease_proof text;
    `,
  },
  {
    version: 3,
    name: "attempt outcome 'released'",
    sql: `
      ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check;
      ALTER TABLE attempts ADD CONSTRAINT attempts_outcome_check
        CHECK (outcome IN ('finished', 'failed', 'retried', 'expired', 'released', 'cancelled'));
    `,
  },
  {
    version: 4,
    name: 'outbox rows set aside',
    sql: `
      -- A row the relay can never publish (issue 18) leaves the outbox like a sent one
      -- (sent_at), with the reason it was set aside instead; a sent row has none.
      ALTER TABLE outbox ADD COLUMN set_aside_reason text;
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
        job_id        text    NOT NULL REFERENCES jobs (id),
        attempt       integer NOT NULL,
        signed_at     bigint  NOT NULL,
        valid_until   bigint  NOT NULL,
        claimed_until bigint,
        closed_at     bigint,
        outcome       text CHECK (outcome IN ('removed', 'delivered')),
        PRIMARY KEY (job_id, attempt),
        CHECK ((closed_at IS NULL) = (outcome IS NULL))
      );
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
      ALTER TABLE outbox ADD COLUMN claimed_until bigint;

      -- The fleet: each worker's last heartbeat (issue 12), so that every orchestrator routes
      -- by and shows the same fleet. proof is the digest of the worker process's secret that
      -- holds the name while it is heard from (issue 18); the JSON columns are its report.
      CREATE TABLE fleet (
        worker         text    PRIMARY KEY,
        proof          text    NOT NULL,
        job_types      json    NOT NULL,
        capabilities   json    NOT NULL,
        held_back      json    NOT NULL,
        slots          integer NOT NULL CHECK (slots >= 0),
        running        integer NOT NULL CHECK (running >= 0),
        last_heartbeat bigint  NOT NULL
      );
      CREATE INDEX fleet_heard ON fleet (last_heartbeat);

      -- Every change to a job is announced on '<schema>.jobs' (payload: the job id) in the
      -- transaction that makes it, so the event streams of every orchestrator see changes
      -- made through another (job-change-feed.ts); a rolled-back change announces nothing.
      CREATE FUNCTION planrun_announce_job_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        PERFORM pg_notify(TG_TABLE_SCHEMA || '.jobs', NEW.id);
        RETURN NULL;
      END
      $fn$;
      CREATE TRIGGER jobs_announce_change AFTER INSERT OR UPDATE ON jobs
      FOR EACH ROW EXECUTE FUNCTION planrun_announce_job_change();
    `,
  },
  {
    version: 8,
    name: 'resource limits per job',
    sql: `
      -- limits of a submission (issue 13): { memoryMb?, processes? } of one run, as JSON; NULL
      -- leaves them to the job type's. The worker enforces the lower of these and the type's.
      ALTER TABLE jobs ADD COLUMN limits jsonb;
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
        id           text    PRIMARY KEY,
        kind         text    NOT NULL CHECK (kind IN ('tenant', 'admin')),
        tenant       text,
        key_sha256   text    NOT NULL UNIQUE,
        prefix       text    NOT NULL,
        created_at   bigint  NOT NULL,
        last_used_at bigint,
        revoked_at   bigint,
        CHECK ((kind = 'admin') = (tenant IS NULL))
      );
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
        job_id        text    NOT NULL REFERENCES jobs (id),
        attempt       integer NOT NULL,
        head_bytes    bigint  NOT NULL,
        head_closed   boolean NOT NULL,
        tail_bytes    bigint  NOT NULL,
        dropped_bytes bigint  NOT NULL,
        dropped_lines bigint  NOT NULL,
        next_seq      integer NOT NULL,
        updated_at    bigint  NOT NULL,
        PRIMARY KEY (job_id, attempt)
      );
      CREATE TABLE log_chunks (
        job_id     text    NOT NULL,
        attempt    integer NOT NULL,
        seq        integer NOT NULL,
        section    text    NOT NULL CHECK (section IN ('head', 'tail')),
        bytes      bigint  NOT NULL,
        line_count integer NOT NULL,
        lines      text    NOT NULL,
        PRIMARY KEY (job_id, attempt, seq)
      );

      -- The last lines of a failed attempt's log, as its worker put them in the error (error.logTail).
      ALTER TABLE jobs ADD COLUMN error_log_tail text;
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
        job_id     text   PRIMARY KEY,
        retry_id   text   NOT NULL UNIQUE,
        created_at bigint NOT NULL
      );

      -- Ended jobs by when they ended: the holding area's time range, the bulk redrive's,
      -- and the retention pass's cut-off.
      CREATE INDEX jobs_ended ON jobs (ended_at) WHERE ended_at IS NOT NULL;

      -- Queued and running jobs by type and tenant, read by every metrics scrape.
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
      ALTER TABLE jobs ADD COLUMN dispatched_attempt integer;
      UPDATE jobs SET dispatched_attempt = attempt WHERE state = 'queued';
      -- Higher first within a tenant's share; a concurrency key caps the live leases of the
      -- tenant's jobs that carry it at concurrency_limit.
      ALTER TABLE jobs ADD COLUMN priority integer NOT NULL DEFAULT 0;
      ALTER TABLE jobs ADD COLUMN concurrency_key text;
      ALTER TABLE jobs ADD COLUMN concurrency_limit integer CHECK (concurrency_limit >= 1);
      -- The dispatcher's two questions: which queued jobs wait for it (by type, tenant and
      -- order of release), and which hold capacity without a lease yet.
      CREATE INDEX jobs_waiting ON jobs (type, tenant, priority DESC, seq) WHERE state = 'queued';
      CREATE INDEX jobs_dispatched ON jobs (type) WHERE state = 'queued' AND dispatched_attempt = attempt;

      -- Each tenant's weight in the fair share (planrun tenants set NAME --weight W); 1 when absent.
      CREATE TABLE tenant_weights (
        tenant text PRIMARY KEY,
        weight integer NOT NULL CHECK (weight >= 1)
      );
      -- Live leases allowed at once per tenant, per job type or per (tenant, type): '' in
      -- tenant or type stands for any (both '' is not a limit anyone sets).
      CREATE TABLE running_limits (
        tenant      text NOT NULL,
        type        text NOT NULL,
        max_running integer NOT NULL CHECK (max_running >= 0),
        PRIMARY KEY (tenant, type),
        CHECK (tenant <> '' OR type <> '')
      );
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
      ALTER TABLE jobs ADD COLUMN grant_abandoned_at bigint;
      CREATE INDEX jobs_grant_unconfirmed ON jobs (grant_abandoned_at) WHERE state = 'running' AND grant_abandoned_at IS NOT NULL;
    `,
  },
];
