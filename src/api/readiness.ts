import type { Broker } from '../broker/broker.js';
import type { Ledger } from '../ledger/ledger.js';

/** A ledger that takes longer than this to answer a one-row read counts as not answering. */
const LEDGER_PROBE_TIMEOUT_MS = 2_000;

/**
 * Whether this orchestrator can do its work: its ledger answers and its broker is
 * connected. The broker's state comes from its connection events (a broker reconnects by
 * itself, saying so), so checking it costs nothing per request.
 */
export class Readiness {
  private brokerProblem: string | undefined;
  private readonly stopWatching: () => void;

  constructor(
    private readonly ledger: Ledger,
    broker: Pick<Broker, 'onEvent'>,
  ) {
    this.stopWatching = broker.onEvent((event) => {
      if (event.type === 'connection_lost') this.brokerProblem = `broker: connection lost (${event.error.message})`;
      if (event.type === 'connection_restored') this.brokerProblem = undefined;
    });
  }

  /** What stops this orchestrator from being ready; empty when it is. */
  async problems(): Promise<string[]> {
    const problems: string[] = [];
    const ledgerProblem = await this.probeLedger();
    if (ledgerProblem) problems.push(ledgerProblem);
    if (this.brokerProblem) problems.push(this.brokerProblem);
    return problems;
  }

  stop(): void {
    this.stopWatching();
  }

  private async probeLedger(): Promise<string | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`ledger: no answer within ${LEDGER_PROBE_TIMEOUT_MS} ms`), LEDGER_PROBE_TIMEOUT_MS);
    });
    // Any read proves the ledger answers; a lookup by primary key is the cheapest one.
    const probe = this.ledger.getJob('readiness-probe').then(
      () => undefined,
      (error: unknown) => `ledger: ${error instanceof Error ? error.message : String(error)}`,
    );
    try {
      return await Promise.race([probe, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
