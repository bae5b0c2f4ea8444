// Drives the npm `perspective-api-client` (unchanged) against modstream's comments:analyze.
// The client posts to Google's fixed URL with axios; the only change is the endpoint, made
// with an axios request interceptor (axios's documented hook) that swaps the origin.
// Usage: node analyze.mjs <base-url> <key> <json options>; prints the answer or the error as JSON.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const axios = require("axios");
const Perspective = require("perspective-api-client");

const [base, key, raw] = process.argv.slice(2);
const { text, ...options } = JSON.parse(raw);
axios.interceptors.request.use((config) => {
  config.url = config.url.replace("https://commentanalyzer.googleapis.com", base);
  return config;
});

const perspective = new Perspective({ apiKey: key });
try {
  const answer = await perspective.analyze(text, options);
  console.log(JSON.stringify({ ok: true, answer }));
} catch (error) {
  const status = error.response ? error.response.status : null;
  console.log(JSON.stringify({ ok: false, name: error.name, message: error.message, status }));
}
