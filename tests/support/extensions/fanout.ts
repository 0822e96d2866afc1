/**
 * Test extension (pi 1.x): a tool that runs other tools, as codemode and MCP do.
 *
 * `fanout` calls `tick` `count` times through `ctx.executeTool()`, one after another;
 * each is a nested call (id `<fanout's id>/<n>`, events with `parentToolCallId`).
 * Every `failEvery`th tick fails. With `deep`, the first tick is made by a nested
 * `fanout` instead, so one call is two levels down. `tick` is callable from tools
 * only (exposure "codemode": never declared to the model).
 */

import { Type } from "@earendil-works/pi-ai";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	pi.registerTool({
		name: "tick",
		label: "Tick",
		description: "Answers with its number; fails when told to.",
		exposure: "codemode",
		parameters: Type.Object({ n: Type.Number(), fail: Type.Optional(Type.Boolean()) }),
		async execute(_id, params) {
			if (params.fail) throw new Error(`tick ${params.n} failed on purpose`);
			return { content: [{ type: "text", text: `tick ${params.n}` }], details: {} };
		},
	});

	pi.registerTool({
		name: "fanout",
		label: "Fan out",
		description: "Runs the tick tool `count` times and reports how many failed.",
		parameters: Type.Object({
			count: Type.Number(),
			failEvery: Type.Optional(Type.Number()),
			deep: Type.Optional(Type.Boolean()),
		}),
		async execute(_id, params, _signal, _onUpdate, ctx) {
			let failed = 0;
			for (let n = 1; n <= params.count; n++) {
				const outcome =
					params.deep && n === 1
						? await ctx.executeTool("fanout", { count: 1 })
						: await ctx.executeTool("tick", {
								n,
								fail: !!params.failEvery && n % params.failEvery === 0,
							});
				if (outcome.isError) failed++;
			}
			const text = `FANOUT-DONE ${params.count} calls, ${failed} failed`;
			return { content: [{ type: "text", text }], details: {} };
		},
	});
}
