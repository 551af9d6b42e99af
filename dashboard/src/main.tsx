import { QueryCache, QueryClient, QueryClientProvider, useQuery } from '@tanstack/react-query';
import { StrictMode, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { Link, Route, Switch, useRoute } from 'wouter';
import { ApiFailure } from './api.js';
import { Failures } from './pages/Failures.js';
import { Fleet } from './pages/Fleet.js';
import { JobDetail } from './pages/JobDetail.js';
import { Jobs } from './pages/Jobs.js';
import { Overview } from './pages/Overview.js';
import { SignIn } from './pages/SignIn.js';
import { SessionProvider, useSessionContext } from './session.js';
import './styles.css';

/** Called when any read finds the key refused (revoked since sign-in): back to sign-in, saying why. */
let onKeyRefused: (message: string) => void = () => undefined;

const client = new QueryClient({
  queryCache: new QueryCache({
    onError: (error) => {
      if (error instanceof ApiFailure && error.kind === 'unauthorized') onKeyRefused(error.message);
    },
  }),
  defaultOptions: {
    queries: {
      // A refusal will not change by asking again; an orchestrator that is down might come back.
      retry: (count, error) => error instanceof ApiFailure && error.kind === 'unreachable' && count < 2,
      refetchOnWindowFocus: true,
    },
  },
});

/** Whether the orchestrator answers: polled, so a banner shows while it is down and goes when it is back. */
function Reachability() {
  const health = useQuery({
    queryKey: ['healthz'],
    queryFn: async () => {
      const response = await fetch('/healthz').catch(() => undefined);
      if (!response?.ok) throw new ApiFailure('unreachable', 'the orchestrator does not answer');
      return true;
    },
    refetchInterval: 3000,
    retry: false,
  });
  if (!health.isError) return null;
  return (
    <div className="banner" role="alert" data-testid="unreachable">
      The orchestrator at {location.origin} does not answer. Retrying every few seconds…{' '}
      <button onClick={() => void client.invalidateQueries()}>Retry now</button>
    </div>
  );
}

function NavLink({ href, children }: { href: string; children: string }) {
  const [active] = useRoute(href === '/' ? '/' : `${href}/*?`);
  return (
    <Link href={href} className={active ? 'active' : ''}>
      {children}
    </Link>
  );
}

function App() {
  const { session, signOut } = useSessionContext();
  const [refused, setRefused] = useState<string | undefined>(undefined);
  useEffect(() => {
    onKeyRefused = (message) => {
      setRefused(`You were signed out: ${message}.`);
      signOut();
      client.clear();
    };
  }, [signOut]);

  if (!session) {
    return (
      <>
        <Reachability />
        <SignIn reason={refused} />
      </>
    );
  }
  return (
    <>
      <Reachability />
      <header>
        <span className="brand">planrun</span>
        <nav>
          <NavLink href="/">Overview</NavLink>
          <NavLink href="/jobs">Jobs</NavLink>
          <NavLink href="/failures">Failures</NavLink>
          <NavLink href="/fleet">Fleet</NavLink>
        </nav>
        <span className="who" data-testid="who">
          {session.kind === 'admin' ? 'admin: every tenant' : 'tenant key'}
        </span>
        <button
          onClick={() => {
            signOut();
            client.clear();
          }}
        >
          Sign out
        </button>
      </header>
      <main>
        <Switch>
          <Route path="/" component={Overview} />
          <Route path="/jobs" component={Jobs} />
          <Route path="/jobs/:id">{(params) => <JobDetail id={params.id} key={params.id} />}</Route>
          <Route path="/failures" component={Failures} />
          <Route path="/fleet" component={Fleet} />
          <Route>
            <p>
              No such page. <Link href="/">Back to the overview</Link>
            </p>
          </Route>
        </Switch>
      </main>
    </>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={client}>
      <SessionProvider>
        <App />
      </SessionProvider>
    </QueryClientProvider>
  </StrictMode>,
);
