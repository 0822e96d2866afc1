/**
 * pi-chat-bridge's approval gate: before a tool call in scope runs, ask the bridge
 * whether it may, and block it unless the answer is an explicit yes.
 *
 * The question is an ordinary `select` dialog whose title is a marker plus one line
 * of JSON (bridge/approvals/ask.py parses it), so the bridge, not this file, decides
 * what to show, whom to ask and what to let through without asking. In scope: every
 * tool but pi's read-only ones (`read`, `grep`, `find`, `ls`), so that while a
 * conversation plans (/plan) the bridge can refuse any tool that may change something,
 * an extension's too; every tool when PI_APPROVAL_GATE=all. It imports nothing (only
 * node's `process` global), so the one file works on every pi version the bridge
 * supports: the `tool_call` event has `toolName`, `toolCallId` and the validated
 * `input` in each.
 */

const PREFIX = "pi-bridge:approval ";
const OPTIONS = ["allow", "always", "deny", "reason"];
// Never asked about (but with PI_APPROVAL_GATE=all): they read and change nothing.
const READ_ONLY = new Set(["read", "grep", "find", "ls"]);
// The title is one RPC line: keep it far below what a client reads in one record, but
// never cut small inputs, since the person approves what they see.
const MAX_JSON = 1_000_000;
const MAX_STRING = 200_000;

const DENIED = "Denied by the person approving in the chat.";
const DENIED_IN_CHAT = "Denied in the chat.";
const UNANSWERED = "Not approved: nobody answered in time, or the question was cancelled.";
const NO_UI = "Not approved: this agent has no chat to ask, so the approval gate blocks the call.";

type Verdict = { block: true; reason: string } | undefined;

const block = (reason: string): Verdict => ({ block: true, reason });

/** Cut every string longer than MAX_STRING, however deep; say whether any was cut. */
function shorten(value: unknown, cut: { any: boolean }): unknown {
	if (typeof value === "string") {
		if (value.length <= MAX_STRING) return value;
		cut.any = true;
		return value.slice(0, MAX_STRING);
	}
	if (Array.isArray(value)) return value.map((item) => shorten(item, cut));
	if (value !== null && typeof value === "object") {
		const out: Record<string, unknown> = {};
		for (const [key, item] of Object.entries(value)) out[key] = shorten(item, cut);
		return out;
	}
	return value;
}

function title(event: any): string {
	let input: unknown = event.input ?? {};
	let truncated = false;
	if (JSON.stringify(input).length > MAX_JSON) {
		const cut = { any: false };
		input = shorten(input, cut);
		truncated = cut.any;
	}
	const payload = {
		v: 1,
		toolCallId: event.toolCallId,
		tool: event.toolName,
		cwd: process.cwd(),
		input,
		truncated,
	};
	// JSON.stringify escapes newlines inside strings, so the title stays one line.
	return PREFIX + JSON.stringify(payload);
}

async function decide(event: any, ctx: any): Promise<Verdict> {
	const answer: unknown = await ctx.ui.select(title(event), OPTIONS);
	if (answer === undefined || answer === null) return block(UNANSWERED);
	if (typeof answer !== "string") return block(`${DENIED_IN_CHAT} (unreadable answer)`);
	if (answer === "allow" || answer === "always") return undefined;
	if (answer === "deny") return block(DENIED);
	// The bridge's own refusal (a plan being made): its reason is shown as it is.
	if (answer.startsWith("refuse:")) return block(answer.slice("refuse:".length).trim() || DENIED);
	if (answer.startsWith("deny:")) {
		const why = answer.slice("deny:".length).trim();
		return block(why ? `Denied in the chat: ${why}` : DENIED_IN_CHAT);
	}
	if (answer === "reason") {
		const why: unknown = await ctx.ui.input("Why not? Your answer goes to the agent.", "reason");
		const text = typeof why === "string" ? why.trim() : "";
		return block(text ? `Denied in the chat: ${text}` : DENIED_IN_CHAT);
	}
	// Never run on an answer this file does not understand (a newer bridge, a typo).
	return block(`${DENIED_IN_CHAT} (unknown answer ${JSON.stringify(answer.slice(0, 80))})`);
}

export default function (pi: any) {
	pi.on("tool_call", async (event: any, ctx: any): Promise<Verdict> => {
		const all = process.env.PI_APPROVAL_GATE === "all";
		if (!all && READ_ONLY.has(event.toolName)) return undefined;
		if (!ctx.hasUI) return block(NO_UI);
		try {
			return await decide(event, ctx);
		} catch (error) {
			// 0.87.1 does not catch a throwing tool_call handler itself: block, say why.
			const message = error instanceof Error ? error.message : String(error);
			return block(`Not approved: the approval gate failed (${message}).`);
		}
	});
}
