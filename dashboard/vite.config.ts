import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Built by `npm run build` (`vite build dashboard`: this folder is the root) into
// dist/dashboard/, which the orchestrator serves at `/` (src/api/dashboard.ts).
export default defineConfig({
  plugins: [react()],
  // Served at the orchestrator's root; client routes (/jobs/…) load the same index.html.
  base: '/',
  build: {
    outDir: '../dist/dashboard',
    // The folder is outside this root: Vite empties it only when told to.
    emptyOutDir: true,
    // The orchestrator serves these files itself: no map of the sources is shipped.
    sourcemap: false,
    chunkSizeWarningLimit: 1024,
  },
  // `npm run dev:dashboard` against a running `planrun up` on the default port.
  server: { proxy: { '/v1': 'http://127.0.0.1:7700', '/healthz': 'http://127.0.0.1:7700' } },
});
