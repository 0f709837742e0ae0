// A minimal MCP Apps host for the tests, built on the reference host side of the spec: the
// @modelcontextprotocol/ext-apps AppBridge, with an @modelcontextprotocol/client Client connected to
// the real rath-mcp server over Streamable HTTP. It does what a host does: reads the tool's
// `_meta.ui.resourceUri`, fetches that resource, renders it in a sandboxed frame under the CSP the
// spec prescribes, sends the tool's input and result, and proxies the view's tools/call to the server.
// Every call the view makes is recorded in window.hostLog for the test to read.

import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

window.hostLog = [];

function cspFor(declared) {
  // The spec's construction from `_meta.ui.csp` (SEP-1865, "Content Security Policy Enforcement").
  const connect = (declared && declared.connectDomains) || [];
  const resources = (declared && declared.resourceDomains) || [];
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${resources.join(" ")}`,
    `style-src 'unsafe-inline' ${resources.join(" ")}`,
    `img-src data: ${resources.join(" ")}`,
    `connect-src ${connect.length ? connect.join(" ") : "'none'"}`,
    "frame-src 'none'",
    "object-src 'none'",
  ].join("; ");
}

window.startHost = async ({ toolName, toolArgs }) => {
  const client = new Client({ name: "rath-test-host", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href)));
  const realCall = (params) => client.callTool(params);

  const tool = (await client.listTools()).tools.find((t) => t.name === toolName);
  const uri = tool._meta.ui.resourceUri;
  const content = (await client.readResource({ uri })).contents[0];
  window.hostResource = { uri, mimeType: content.mimeType, meta: content._meta };
  const csp = cspFor(content._meta && content._meta.ui && content._meta.ui.csp);
  const html = content.text.replace("<head>", () => `<head><meta http-equiv="Content-Security-Policy" content="${csp}">`);

  const iframe = document.createElement("iframe");
  iframe.id = "view";
  iframe.setAttribute("sandbox", "allow-scripts"); // an opaque origin: no access to this page
  iframe.style.cssText = "width: 980px; height: 600px; border: 1px solid #ccc;";
  document.body.append(iframe);

  // No client handed to the bridge: this host forwards the view's tools/call itself (oncalltool),
  // so it can record each one.
  const bridge = new AppBridge(
    null,
    { name: "rath-test-host", version: "1.0.0" },
    { serverTools: {}, serverResources: {}, logging: {} },
    { hostContext: { theme: "light", displayMode: "inline", platform: "web" } },
  );
  bridge.oncalltool = async (params) => {
    window.hostLog.push({ name: params.name, arguments: params.arguments }); // what the view asked for
    return realCall(params);
  };
  bridge.onsizechange = ({ height }) => {
    if (height) iframe.style.height = `${Math.min(height, 2000)}px`;
  };
  bridge.oninitialized = async () => {
    window.hostLog.push({ initialized: true });
    await bridge.sendToolInput({ arguments: toolArgs });
    const result = await realCall({ name: toolName, arguments: toolArgs });
    await bridge.sendToolResult(result);
  };
  // Listen before the view loads: it says ui/initialize as soon as its script runs.
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = html;
  return true;
};
