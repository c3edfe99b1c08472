// Runs cycgraph graphs to the end, each against its own OpenAI-compatible server, and prints
// what each run did as one line, RESULT and JSON (cycgraph logs to stdout too): {name, status, visited, memory, supervisor, error}.
// Input on stdin: {"package": "<dir of @cycgraph/orchestrator>", "cases": [{name, graph, agents,
// base_url, goal, memory, max_iterations, decisions}]}; each agent is {id, model}, served by the
// case's base_url; decisions ('approved' / 'rejected') answer the graph's approvals in turn;
// mcp_servers (optional) are MCP server entries ({id, name, transport}) its nodes' tools may name.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const input = JSON.parse(readFileSync(0, 'utf8'));
const load = (relative) => import(pathToFileURL(join(input.package, relative)).href);
const cycgraph = await load('dist/index.js');
// The OpenAI provider cycgraph itself depends on, resolved from its own install.
const { createRequire } = await import('node:module');
const requireFromPackage = createRequire(join(input.package, 'package.json'));
const { createOpenAI } = await import(pathToFileURL(requireFromPackage.resolve('@ai-sdk/openai')).href);

async function runCase(spec) {
  const providers = cycgraph.createProviderRegistry();
  const openai = createOpenAI({ baseURL: spec.base_url, apiKey: 'sk-compat' });
  // Chat Completions, the protocol our fake (and every OpenAI-compatible server) speaks.
  providers.register('fake', (model) => openai.chat(model), { models: [], allowUnknownModels: true });
  const registry = new cycgraph.InMemoryAgentRegistry();
  for (const agent of spec.agents) {
    registry.register({ id: agent.id, name: agent.id, model: agent.model, provider: 'fake',
      system_prompt: agent.system ?? `You are ${agent.id}.`, read_keys: ['*'], write_keys: ['*'] });
  }
  // cycgraph keys graphs by UUID; ours by name, so each run gets a fresh id.
  const graph = cycgraph.GraphSchema.parse({ ...spec.graph, id: crypto.randomUUID() });
  const state = cycgraph.createWorkflowState({ workflowId: graph.id, goal: spec.goal,
    constraints: spec.constraints ?? [], memory: spec.memory ?? {},
    // cycgraph bounds node runs on the run's state, not in the graph document.
    ...(spec.graph.max_iterations ? { maxIterations: spec.graph.max_iterations } : {}) });
  // MCP servers registered by id, reached through cycgraph's own connection manager.
  const mcpRegistry = new cycgraph.InMemoryMCPServerRegistry();
  for (const server of spec.mcp_servers ?? []) await mcpRegistry.saveServer(server);
  const mcp = spec.mcp_servers ? new cycgraph.MCPConnectionManager(mcpRegistry) : null;
  const runner = new cycgraph.GraphRunner(graph, state, { registry, providers, ...(mcp ? { tools: [mcp] } : {}) });
  let final;
  let error = null;
  try {
    final = await runner.run();
    // A graph paused at an approval gets the decisions the case scripts, one per pause.
    for (const decision of spec.decisions ?? []) {
      if (final.status !== 'waiting') break;
      runner.applyHumanResponse({ decision });
      final = await runner.run();
    }
  } catch (err) {
    error = String(err?.message ?? err);
    final = runner.state ?? state;
  } finally {
    if (mcp) await mcp.closeAll();
  }
  return {
    name: spec.name,
    status: final.status,
    visited: final.visited_nodes,
    memory: final.memory,
    supervisor: (final.supervisor_history ?? []).map((h) => h.delegated_to ?? h.next ?? h),
    error,
  };
}

for (const spec of input.cases) {
  process.stdout.write('RESULT ' + JSON.stringify(await runCase(spec)) + '\n');
}
