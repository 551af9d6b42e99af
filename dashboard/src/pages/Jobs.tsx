/**
 * The jobs list: filters by state, type and (admin) tenant kept in the address, a search
 * that opens a job by id, newest first, a page at a time by the API's cursor, read again
 * every few seconds.
 */
import { createColumnHelper, flexRender, getCoreRowModel, useReactTable } from '@tanstack/react-table';
import { useState, type FormEvent } from 'react';
import { Link, useLocation, useSearch } from 'wouter';
import type { JobState, JobSummary } from '../api.js';
import { FailureNotice, StateBadge, age } from '../components/Notice.js';
import { useJobPage } from '../queries.js';
import { useSession } from '../session.js';

const column = createColumnHelper<JobSummary>();

const columns = [
  column.accessor('id', { header: 'job', cell: (c) => <Link href={`/jobs/${c.getValue()}`}>{c.getValue().slice(0, 8)}</Link> }),
  column.accessor('type', { header: 'type' }),
  column.accessor('tenant', { header: 'tenant' }),
  column.accessor('state', { header: 'state', cell: (c) => <StateBadge state={c.getValue()} /> }),
  column.accessor('progress', {
    header: 'progress',
    cell: (c) => (c.getValue() === null ? '—' : <progress max={1} value={c.getValue() ?? 0} />),
  }),
  column.accessor('attempt', { header: 'attempt', cell: (c) => `${c.getValue()} / ${c.row.original.maxAttempts}` }),
  column.accessor((job) => job.error?.code ?? '', { id: 'error', header: 'error' }),
  column.accessor('createdAt', { header: 'submitted', cell: (c) => age(c.getValue()) }),
];

const states: JobState[] = ['queued', 'running', 'finished', 'failed'];

export function Jobs() {
  const { kind } = useSession();
  const search = new URLSearchParams(useSearch());
  const [, navigate] = useLocation();
  const state = (search.get('state') ?? undefined) as JobState | undefined;
  const type = search.get('type') ?? undefined;
  const tenant = search.get('tenant') ?? undefined;
  // The cursors of the pages before this one: "previous" pops one.
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const page = useJobPage({ state, type, tenant, cursor, limit: 50 });
  const [jobId, setJobId] = useState('');

  const table = useReactTable({
    data: page.data?.jobs ?? [],
    columns,
    getCoreRowModel: getCoreRowModel(),
    state: { columnVisibility: { tenant: kind === 'admin' } },
  });

  function setFilter(name: string, value: string) {
    const next = new URLSearchParams(search);
    if (value) next.set(name, value);
    else next.delete(name);
    setCursors([]);
    navigate(`/jobs${next.size ? `?${next.toString()}` : ''}`);
  }

  function open(event: FormEvent) {
    event.preventDefault();
    if (jobId.trim()) navigate(`/jobs/${jobId.trim()}`);
  }

  return (
    <section>
      <h1>Jobs</h1>
      <div className="filters">
        <label>
          state
          <select value={state ?? ''} onChange={(e) => setFilter('state', e.target.value)} name="state">
            <option value="">any</option>
            {states.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          type
          <input defaultValue={type} name="type" placeholder="any" onBlur={(e) => setFilter('type', e.target.value.trim())} />
        </label>
        {kind === 'admin' && (
          <label>
            tenant
            <input defaultValue={tenant} name="tenant" placeholder="every tenant" onBlur={(e) => setFilter('tenant', e.target.value.trim())} />
          </label>
        )}
        <form onSubmit={open}>
          <label>
            open job
            <input value={jobId} onChange={(e) => setJobId(e.target.value)} name="job-id" placeholder="job id" />
          </label>
        </form>
      </div>
      {page.error ? (
        <FailureNotice error={page.error} what="the jobs" />
      ) : (
        <table className="grid" data-testid="jobs-table">
          <thead>
            {table.getHeaderGroups().map((group) => (
              <tr key={group.id}>
                {group.headers.map((header) => (
                  <th key={header.id}>{flexRender(header.column.columnDef.header, header.getContext())}</th>
                ))}
              </tr>
            ))}
          </thead>
          <tbody>
            {table.getRowModel().rows.map((row) => (
              <tr key={row.id} data-job={row.original.id}>
                {row.getVisibleCells().map((cell) => (
                  <td key={cell.id}>{flexRender(cell.column.columnDef.cell, cell.getContext())}</td>
                ))}
              </tr>
            ))}
            {page.data?.jobs.length === 0 && (
              <tr>
                <td colSpan={columns.length}>No jobs match.</td>
              </tr>
            )}
          </tbody>
        </table>
      )}
      <div className="pager">
        <button disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
          ← newer
        </button>
        <button disabled={!page.data?.nextCursor} onClick={() => page.data?.nextCursor && setCursors([...cursors, page.data.nextCursor])}>
          older →
        </button>
      </div>
    </section>
  );
}
