/**
 * The value a job type is counted under in the `type` label of the orchestrator's metrics.
 * Any tenant can submit any type name, so labelling by the name as sent would let one
 * tenant read another's type names on `/metrics` and grow the series without bound. A
 * type gets a label of its own only once some worker of the fleet (or the declared fleet)
 * offers it, and only the first `max` such types do; every other job is counted under
 * `otherTypeLabel`. A label once given is kept, so a type's series do not break when its
 * workers come and go.
 */
export class TypeLabels {
  private readonly named = new Set<string>();

  constructor(
    private readonly offered: (type: string) => boolean,
    private readonly max: number,
  ) {}

  of(type: string): string {
    if (this.named.has(type)) return type;
    if (this.named.size >= this.max || !this.offered(type)) return otherTypeLabel;
    this.named.add(type);
    return type;
  }
}

/** Starts with `_`, which no job type name can (they start with a letter): it cannot be mistaken for a type. */
export const otherTypeLabel = '_other';

/** Job types with a label of their own, at most. */
export const defaultMaxTypeLabels = 100;
