/**
 * Test extension: a message that contains "#note" is taken by the extension's input
 * handler, as a note-taking extension would take it, and no run starts for it (pi 1.x
 * answers such a prompt, steer or follow-up with the disposition "handled"). It
 * notifies "noted: <text>", so a test sees that the message arrived.
 */

import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	pi.on("input", async (event, ctx) => {
		if (!event.text.includes("#note")) return { action: "continue" };
		ctx.ui.notify(`noted: ${event.text}`, "info");
		return { action: "handled" };
	});
}
