// A TypeScript SDK v2 agent speaking MCP 2026-07-28 (pinned) to ahead over
// streamable HTTP: argv[2] is the URL, argv[3] the run's Ahead-Session
// header ("" for none), argv[4] the traceparent to put in each call's _meta
// ("" for none). It prints one JSON object: what it saw. MCP_CLIENT is the
// file URL of the pinned @modelcontextprotocol/client (testdeps).
const { Client, StreamableHTTPClientTransport } = await import(process.env.MCP_CLIENT);

const [url, session, traceparent] = process.argv.slice(2);
const headers = session ? { 'Ahead-Session': session } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: 'ts-agent', version: '2.4.0' },
  { versionNegotiation: { mode: { pin: '2026-07-28' } } });
await client.connect(transport);
const _meta = traceparent ? { traceparent } : undefined;
const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args, _meta });
  return { text: res.content.map(c => c.text).join('\n'), source: res._meta?.ahead?.source };
};
const out = { version: client.getNegotiatedProtocolVersion() };
out.tools = (await client.listTools()).tools.map(t => t.name).sort();
out.prompt = (await client.getPrompt({ name: 'greet', arguments: { who: 'ada' } })).messages[0].content.text;
out.resource = (await client.readResource({ uri: 'test://motd' })).contents[0].text;
out.list = await call('list', {});
out.read = await call('read', { name: 'a.txt' });
out.mine = await call('read', { name: 'b.txt' });
console.log(JSON.stringify(out));
await client.close();
