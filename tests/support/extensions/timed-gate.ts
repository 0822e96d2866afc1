/**
 * Test extension: before a bash command that mentions "timed", ask a select
 * dialog that times out after 1.5 s (the agent then resolves it by itself and
 * tells the client nothing). The command is blocked unless "Run" is chosen.
 */

import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	pi.on("tool_call", async (event, ctx) => {
		if (event.toolName !== "bash") return undefined;
		const command = event.input.command as string;
		if (!command.includes("timed")) return undefined;
		const choice = await ctx.ui.select(`Run ${command}?`, ["Run", "Skip"], { timeout: 1500 });
		if (choice !== "Run") return { block: true, reason: `Not run (${choice ?? "timed out"})` };
		return undefined;
	});
}
