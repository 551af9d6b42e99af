// ESLint: the type-aware rules of typescript-eslint over the whole tree; formatting is
// Prettier's (eslint-config-prettier turns off the rules it owns).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', '.build/', 'node_modules/', 'examples/dist/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { project: ['./tsconfig.test.json', './examples/tsconfig.json', './dashboard/tsconfig.json'], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A promise nobody awaits must say so (`void`): a lost rejection is a lost job.
      // node:test's describe/it return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] },
          ],
        },
      ],
      // Fastify's and pg's callbacks may be async: they await what they are given.
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, properties: false } }],
      // An async function that does not await still returns a promise, as the interfaces it implements ask.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Tests and tools read JSON they did not type (HTTP answers, histories): asserting on
    // its shape is their job, so `any` from JSON is not worth a cast at every step.
    files: ['**/*.test.ts', 'test/**/*.ts', 'tools/**/*.ts', 'examples/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // assert.rejects(client.get, ...) and the like pass methods on purpose.
      '@typescript-eslint/unbound-method': 'off',
      // Terminal output is matched with its escape codes.
      'no-control-regex': 'off',
    },
  },
  { files: ['**/*.js'], ...tseslint.configs.disableTypeChecked },
  prettier,
);
