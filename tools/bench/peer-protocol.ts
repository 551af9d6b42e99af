/** What the benchmark's worker and consumer processes tell their driver, over the IPC channel. */
export type PeerMessage =
  /** Connected and consuming. */
  | { kind: 'ready' }
  /** Jobs (messages) done so far, and when the latest one was done. */
  | { kind: 'progress'; done: number; lastAt: number }
  /** A job marked for latency started (its id and when). */
  | { kind: 'started'; id: string; at: number }
  | { kind: 'failed'; message: string };

export type PeerCommand = { kind: 'stop' };

export interface AmqpConsumerConfig {
  mode: 'amqp-consumer';
  url: string;
  queue: string;
  prefetch: number;
}

export interface EmbeddedConsumerConfig {
  mode: 'embedded-consumer';
  socketPath: string;
  queue: string;
  prefetch: number;
}

export interface BullmqWorkerConfig {
  mode: 'bullmq-worker';
  host: string;
  port: number;
  queue: string;
  prefix: string;
  concurrency: number;
  /** Run each job in BullMQ's pool of child processes (a sandboxed processor) instead of the worker's own event loop. */
  sandboxed: boolean;
}

export interface PlanrunWorkerConfig {
  mode: 'planrun-worker';
  /** RabbitMQ URL, or else the embedded broker's socket. */
  amqpUrl?: string;
  socketPath?: string;
  prefix: string;
  slots: number;
  scratchDir: string;
  outputDir: string;
  /** Profile the job processes too: each leaves its `.cpuprofile` here when it exits. */
  jobCpuProfileDir?: string;
}

/** One more planrun orchestrator on the driver's PostgreSQL ledger and RabbitMQ (issue 12: several orchestrators, one ledger). */
export interface PlanrunOrchestratorConfig {
  mode: 'planrun-orchestrator';
  amqpUrl: string;
  /** The ledger's connection string and schema, the driver's orchestrator's. */
  postgresUrl: string;
  schema: string;
  prefix: string;
  leaseTtlMs: number;
}

export type PeerConfig = AmqpConsumerConfig | EmbeddedConsumerConfig | BullmqWorkerConfig | PlanrunWorkerConfig | PlanrunOrchestratorConfig;

/** Header (amqplib) or data field (BullMQ) marking a message whose start the driver times. */
export const latencyMark = 'bench-latency';
