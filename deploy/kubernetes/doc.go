// Package kubernetes holds the kustomization that runs backfill's phases as
// Kubernetes Jobs (docs/scale-out.md) and, in its tests, their checks: the
// kustomization rendered by Kustomize's own code, decoded strictly into the
// API types, held to the restricted Pod Security Standard by the
// admission's own checks. It is a module of its own, so that the project's
// module does not take Kubernetes' dependencies.
package kubernetes
