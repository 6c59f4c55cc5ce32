// A TypeScript SDK v2 agent speaking MCP 2026-07-28 (pinned) to ahead over
// streamable HTTP, in the run argv[3] names (Ahead-Session), that listens
// for tool list changes and for updates of the resource argv[4]
// (subscriptions/listen). It prints one line per event: "ack " + what the
// server agreed to (JSON), "tools", or "updated " + a URI; it ends when its
// stdin closes. MCP_CLIENT is the file URL of the pinned
// @modelcontextprotocol/client (testdeps).
const { Client, StreamableHTTPClientTransport } = await import(process.env.MCP_CLIENT);

const [url, session, uri] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url),
  { requestInit: { headers: { 'Ahead-Session': session } } });
const client = new Client({ name: 'ts-listener', version: '2.4.0' },
  { versionNegotiation: { mode: { pin: '2026-07-28' } } });
client.setNotificationHandler('notifications/tools/list_changed', () => console.log('tools'));
client.setNotificationHandler('notifications/resources/updated', n => console.log('updated ' + n.params.uri));
await client.connect(transport);
const sub = await client.listen({ toolsListChanged: true, resourceSubscriptions: [uri] });
console.log('ack ' + JSON.stringify(sub.honoredFilter));
process.stdin.resume();
await new Promise(resolve => process.stdin.on('end', resolve));
await sub.close();
await client.close();
