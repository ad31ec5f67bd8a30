// The hook's tests: jsdom, against the real server whose address GLASSBOX_TEST_SERVER gives
// (tests/e2e/tests/react.rs starts it and runs these), once with React 19 and once with React 18
// (installed in test/react18 by `cargo xtask build`).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { glassboxAlias } from './vite.config.js';

const react18 = fileURLToPath(new URL('./test/react18/node_modules/', import.meta.url));

export default defineConfig({
  test: {
    environment: 'jsdom',
    // The page's origin, which the test server allows.
    environmentOptions: { jsdom: { url: 'http://localhost:3000/' } },
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      { extends: true, resolve: { alias: glassboxAlias }, test: { name: 'react19' } },
      {
        extends: true,
        resolve: {
          alias: [
            ...glassboxAlias,
            { find: /^react$/, replacement: `${react18}react/index.js` },
            { find: /^react\/(.+)$/, replacement: `${react18}react/$1.js` },
            { find: /^react-dom$/, replacement: `${react18}react-dom/index.js` },
            { find: /^react-dom\/(.+)$/, replacement: `${react18}react-dom/$1.js` },
            { find: /^@testing-library\/react$/, replacement: `${react18}@testing-library/react/dist/index.js` },
          ],
        },
        test: { name: 'react18' },
      },
    ],
  },
});
