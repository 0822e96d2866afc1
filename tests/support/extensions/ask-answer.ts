/**
 * Test extension: before a bash command that mentions "ask-input" or "ask-editor",
 * open an input (placeholder "feature/…") or editor (prefill "draft text") dialog,
 * then block the command with the answer in the reason, so the model's next
 * request shows exactly what the agent received ("answer=<value>", or
 * "answer=<cancelled>").
 */

import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	pi.on("tool_call", async (event, ctx) => {
		if (event.toolName !== "bash") return undefined;
		const command = event.input.command as string;
		let answer: string | undefined;
		if (command.includes("ask-input")) {
			answer = await ctx.ui.input("Branch name?", "feature/…");
		} else if (command.includes("ask-editor")) {
			answer = await ctx.ui.editor("Edit the note", "draft text");
		} else {
			return undefined;
		}
		return { block: true, reason: `answer=${answer ?? "<cancelled>"}` };
	});
}
