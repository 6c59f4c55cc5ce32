// A TypeScript SDK v2 agent speaking MCP 2026-07-28 (pinned) to ahead mcp
// over stdio: argv[2] is the command, the rest its arguments. It prints one
// JSON object: what it saw. MCP_CLIENT is the directory of the pinned
// @modelcontextprotocol/client's dist (testdeps), as a file URL.
const { Client } = await import(process.env.MCP_CLIENT + '/index.mjs');
const { StdioClientTransport } = await import(process.env.MCP_CLIENT + '/stdio.mjs');

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, stderr: 'inherit' });
const client = new Client({ name: 'ts-agent', version: '2.4.0' },
  { versionNegotiation: { mode: { pin: '2026-07-28' } } });
await client.connect(transport);
const out = { version: client.getNegotiatedProtocolVersion() };
out.tools = (await client.listTools()).tools.length;
const res = await client.callTool({ name: 'test_simple_text', arguments: {} });
out.text = res.content.map(c => c.text).join('\n');
out.source = res._meta?.ahead?.source;
out.prompt = (await client.getPrompt({ name: 'test_simple_prompt' })).messages.length;
out.resource = (await client.readResource({ uri: 'test://static-text' })).contents.length;
console.log(JSON.stringify(out));
await client.close();
