// An agent-style program: create a sandbox, write a file, run it, read its
// output, snapshot it, terminate it.
//   CORRAL_URL=http://127.0.0.1:7070 CORRAL_TOKEN=... node examples/typescript/agent.mjs
import { Sandbox } from "../../sdk/typescript/src/index.js";

const sb = await Sandbox.create({ timeout: 300, memory: 256, tags: { example: "agent" } });
console.log("sandbox", sb.sandboxId);
try {
  await sb.files.write("/work/solve.py", "import json\nprint(json.dumps({'answer': 6 * 7}))\nopen('/work/out.txt', 'w').write('done')\n");
  const proc = await sb.exec(["python3", "/work/solve.py"], { workdir: "/work" });
  for await (const line of proc.stdout) console.log("stdout:", line);
  const code = await proc.wait();
  console.log("exit", code, "stderr:", JSON.stringify(await proc.stderr.readText()));
  console.log("out.txt:", await sb.files.readText("/work/out.txt"));
  const snap = await sb.snapshot();
  console.log("snapshot", snap.id, "(start copies with Sandbox.create({ fromSnapshot }))");
} finally {
  await sb.terminate();
}
