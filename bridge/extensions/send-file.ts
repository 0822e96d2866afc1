/**
 * pi-chat-bridge's own extension: a `send_file` tool that hands a file of the agent's
 * working directory to the person in the chat.
 *
 * The tool only checks the path and says what it sends; the bridge, which sees the
 * call's start and end by toolCallId, reads the file itself (only a regular file
 * inside the workspace, within its size cap) and uploads it when the call ends
 * without error. It imports nothing but `typebox`, which every pi version this bridge
 * supports resolves for extensions, so one file works for all of them.
 */

import { existsSync, realpathSync, statSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";
import { Type } from "typebox";

const inside = (root: string, target: string): boolean => {
	const rel = relative(root, target);
	return rel === "" ? false : !rel.startsWith("..") && !isAbsolute(rel);
};

export default function (pi: any) {
	pi.registerTool({
		name: "send_file",
		label: "Send file",
		description:
			"Send a file from your working directory to the person you are chatting with " +
			"(a patch, a report, a screenshot, a log). The path is relative to your working " +
			"directory; the file must be inside it.",
		parameters: Type.Object({
			path: Type.String({ description: "the file, relative to your working directory" }),
			caption: Type.Optional(Type.String({ description: "a short note to go with it" })),
		}),
		async execute(_toolCallId: string, params: { path: string; caption?: string }) {
			const root = realpathSync(process.cwd());
			const asked = resolve(root, params.path);
			if (isAbsolute(params.path) || !existsSync(asked)) {
				throw new Error(`no file ${params.path} in the working directory`);
			}
			const real = realpathSync(asked);
			if (!inside(root, real) || !statSync(real).isFile()) {
				throw new Error(`${params.path} is not a file inside the working directory`);
			}
			const name = relative(root, real);
			return {
				content: [{ type: "text", text: `Sent ${name} to the chat.` }],
				details: { path: name, caption: params.caption ?? "" },
			};
		},
	});
}
