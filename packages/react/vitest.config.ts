// The hook's tests: jsdom, against the real server whose address GLASSBOX_TEST_SERVER gives
// (tests/e2e/tests/react.rs starts it and runs these).
import { defineConfig } from 'vitest/config';
import { glassboxAlias } from './vite.config.js';

export default defineConfig({
  resolve: { alias: glassboxAlias },
  test: {
    environment: 'jsdom',
    // The page's origin, which the test server allows.
    environmentOptions: { jsdom: { url: 'http://localhost:3000/' } },
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
