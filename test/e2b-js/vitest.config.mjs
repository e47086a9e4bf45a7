import { defineConfig } from 'vitest/config'

// One daemon serves every test (test/e2e/e2b_sdk_test.go starts it and
// sets E2B_API_URL and E2B_API_KEY): files run one after another, and a
// test may wait for a sandbox's lifetime to run out. The first create from
// "base" builds that template's image.
export default defineConfig({
  test: {
    include: ['tests/**/*.test.mjs'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 900_000,
    reporters: ['verbose'],
  },
})
