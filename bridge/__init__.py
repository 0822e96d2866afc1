"""pi-chat-bridge: connects chat platforms to pi coding agents running in RPC mode.

`bridge` holds everything platform-neutral; platform SDKs live only in `adapters`.
"""
