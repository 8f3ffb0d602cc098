// Package admission calls admission hooks: HTTP services that the agent asks,
// before it accepts a change to a resource, whether the change is allowed,
// and that may amend it. They work like Kubernetes' validating and mutating
// admission webhooks, and use the same shape of request and response.
//
// # Configuration
//
// The agent configuration lists the hooks under admission:
//
//	admission:
//	  - name: defaults              # unique; names the hook in messages and logs
//	    url: https://hooks.example.com/defaults
//	    type: mutating              # or validating
//	    kinds: [DatabaseCluster]    # empty or left out: every kind
//	    operations: [create, update] # empty or left out: create, update and delete
//	    failurePolicy: Fail         # or Ignore; default Fail
//	    timeout: 5s                 # default 10s, at most 30s
//	    secretEnv: DEFAULTS_HOOK_SECRET # optional: the variable holding the HMAC key
//
// # Order
//
// For each resource being created, updated or deleted, the hooks whose kinds
// and operations match are called one at a time: first the mutating hooks in
// the order configured, each seeing the object as the hooks before it
// patched it, then the validating hooks in the order configured, each seeing
// the final object. The first hook that refuses ends the review: the hooks
// after it are not called.
//
// # Request
//
// The agent POSTs an AdmissionReview to the hook's URL:
//
//	POST /defaults HTTP/1.1
//	Content-Type: application/json
//	User-Agent: no8s-agent
//	X-No8s-Delivery: 5d0c1a8e0f7b4c2e9a6d3b1f8e2c4a7d
//	X-No8s-Signature-256: sha256=8f1e...
//
//	{
//	  "apiVersion": "no8s.io/v1",
//	  "kind": "AdmissionReview",
//	  "request": {
//	    "uid": "0b6d5f8e-3c1a-4e7b-9f2d-6a8c4e1b7d30",
//	    "kind": "DatabaseCluster",
//	    "name": "orders",
//	    "operation": "update",
//	    "source": "platform",
//	    "revision": "main@sha1:4f2a...",
//	    "object": {
//	      "apiVersion": "example.com/v1",
//	      "kind": "DatabaseCluster",
//	      "metadata": {"name": "orders", "labels": {"team": "shop"}, "annotations": {}},
//	      "spec": {"size": "large"}
//	    },
//	    "oldObject": {"apiVersion": "example.com/v1", "kind": "DatabaseCluster", "...": "..."},
//	    "dryRun": false
//	  }
//	}
//
// operation is "create", "update" or "delete". object is the resource as it
// would be after the change, written like a manifest; it is null on delete.
// oldObject is the resource as it is now; it is null on create. source is
// the source that declares the resource ("api" for one written through the
// HTTP API), and revision the source's revision being synced, or "" when
// there is none. dryRun is true when the change is only previewed (for a pull request)
// and will not be made: a hook with side effects should skip them.
//
// uid identifies the review: every hook called for the same change gets the
// same uid, and must echo it. X-No8s-Delivery is different for every call.
//
// When the hook has a secretEnv, X-No8s-Signature-256 carries "sha256=" and
// the hex HMAC-SHA256 of the request body keyed with the secret, the scheme
// of GitHub's webhooks and of the agent's http action and notifications. A
// hook should compute the HMAC of the body as received and compare it in
// constant time. Without secretEnv the header is not sent.
//
// # Response
//
// The hook answers 200 (any 2xx) with a JSON body:
//
//	{
//	  "apiVersion": "no8s.io/v1",
//	  "kind": "AdmissionReview",
//	  "response": {
//	    "uid": "0b6d5f8e-3c1a-4e7b-9f2d-6a8c4e1b7d30",
//	    "allowed": true,
//	    "status": {"message": "why not, when allowed is false", "code": 403},
//	    "patchType": "JSONPatch",
//	    "patch": "W3sib3AiOiJyZXBsYWNlIiwicGF0aCI6Ii9zcGVjL3NpemUiLCJ2YWx1ZSI6Im1lZGl1bSJ9XQ==",
//	    "warnings": ["size large is deprecated"]
//	  }
//	}
//
// The patch above is base64 for
//
//	[{"op":"replace","path":"/spec/size","value":"medium"}]
//
// uid and allowed are required; apiVersion and kind are not checked. When
// allowed is false the change is refused, and status.message says why to the
// person who made it; status.code, when it is between 400 and 599, is passed
// on as the HTTP status to use. warnings are shown to that person whether or
// not the change is allowed; at most 16 are kept per hook, each cut at 512
// bytes, and a message at 4 KiB.
//
// Only a mutating hook may return a patch, and only for create and update.
// The patch is an RFC 6902 JSON Patch against object, either base64-encoded
// in a string as Kubernetes has it, or written as a plain JSON array.
// patchType, when present, must be "JSONPatch". An empty patch changes
// nothing. A patch may not change the object's kind or metadata.name.
//
// # Failures
//
// The hook has failed when it cannot be reached, does not answer within its
// timeout, answers other than 2xx (redirects are not followed), answers with
// more than 1 MiB, or with a body that is not the response above: not JSON,
// no response, no allowed, a uid other than the request's, a patch from a
// validating hook or on delete, a patch that does not apply, or one that
// changes kind or metadata.name. With failurePolicy Fail, a failure refuses
// the change, with a message naming the hook and what went wrong; with
// Ignore, the change goes on as if the hook had allowed it without a patch,
// and the failure is added to the warnings.
package admission
