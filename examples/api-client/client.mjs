// A chat client for minfer serve written against the official OpenAI library: it
// lists the models, then runs the same greedy chat completion twice, whole and
// streamed, and prints one JSON line per completion; a third request passes minfer's
// extension field ("minfer") through the library and prints what the server reports.
//
//   node client.mjs [BASE_URL] [PROMPT]      (BASE_URL default http://127.0.0.1:8080)
//
// MINFER_API_KEY is sent as the bearer token when the server requires one.
import OpenAI from "openai";

const base = (process.argv[2] ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
const prompt = process.argv[3] ?? "Once upon a time";
const client = new OpenAI({
  baseURL: `${base}/v1`,
  apiKey: process.env.MINFER_API_KEY ?? "unused",
  maxRetries: 0,
});

const models = await client.models.list();
const model = models.data[0].id;
const request = {
  model,
  messages: [{ role: "user", content: prompt }],
  max_tokens: 24,
  temperature: 0,
};

// 1. non-streamed
const whole = await client.chat.completions.create(request);
console.log(JSON.stringify({
  mode: "whole",
  model: whole.model,
  text: whole.choices[0].message.content,
  finish_reason: whole.choices[0].finish_reason,
  usage: whole.usage,
}));

// 2. streamed, with usage in the last chunk
const stream = await client.chat.completions.create({
  ...request,
  stream: true,
  stream_options: { include_usage: true },
});
let text = "";
let chunks = 0;
let finish = null;
let usage = null;
for await (const chunk of stream) {
  chunks++;
  for (const choice of chunk.choices) {
    text += choice.delta?.content ?? "";
    finish = choice.finish_reason ?? finish;
  }
  usage = chunk.usage ?? usage;
}
console.log(JSON.stringify({ mode: "stream", model, text, finish_reason: finish, chunks, usage }));

// 3. minfer's extension field: choose plugins the server's config allows and ask for
// the greedy-identity check; the response's "minfer" field reports on them.
const ext = await client.chat.completions.create({
  ...request,
  minfer: { sampler: "greedy", assert_identity: true },
});
console.log(JSON.stringify({
  mode: "extension",
  model,
  text: ext.choices[0].message.content,
  finish_reason: ext.choices[0].finish_reason,
  usage: ext.usage,
  minfer: { sampler: ext.minfer?.sampler, identity: ext.minfer?.identity },
}));
