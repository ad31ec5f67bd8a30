// Builds the React demo (demo/) into public/react/, served by the Glassbox server at /react/.
// glassbox-chat resolves to the package folder `cargo xtask build` writes.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

const chat = fileURLToPath(new URL('../../dist/npm/glassbox-chat/', import.meta.url));

export const glassboxAlias = [
  { find: /^glassbox-chat\/wasm$/, replacement: `${chat}glassbox-wasm.js` },
  { find: /^glassbox-chat\/chat$/, replacement: `${chat}glassbox-chat.js` },
  { find: /^glassbox-chat$/, replacement: `${chat}index.js` },
];

export default defineConfig({
  root: fileURLToPath(new URL('./demo/', import.meta.url)),
  base: '/react/',
  plugins: [react()],
  resolve: { alias: glassboxAlias },
  build: {
    outDir: fileURLToPath(new URL('../../public/react/', import.meta.url)),
    emptyOutDir: true,
    // The chat's small wasm chunks stay files: inlined as data: URLs, their fetch would need
    // `connect-src data:` in the page's Content-Security-Policy.
    assetsInlineLimit: (file) => (file.endsWith('.wasm') ? false : undefined),
  },
});
