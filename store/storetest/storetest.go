// Package storetest is the conformance suite of store.Store. Every backend
// runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openFreshStore(t) })
//	}
//
// The suite uses only the store.Store interface. Beyond the interface's doc
// comments it expects what callers rely on: specs and outputs come back byte
// for byte (so a spec still matches its hash), times come back in UTC and
// equal to what was written at millisecond precision, and an empty map or
// slice may come back nil or empty.
package storetest

import (
	"testing"

	"github.com/no8s/no8s-agent/store"
)

// Run runs the conformance suite. open must return a store with an empty,
// current schema that no other test uses, and close it when t ends. Each
// test calls open, and the tests run in parallel.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"ResourceTypes", testResourceTypes},
		{"PutResourceTypeUpdates", testPutResourceTypeUpdates},
		{"PutResourceTypeOwnerConflict", testPutResourceTypeOwnerConflict},
		{"PutResourceTypeGroupConflict", testPutResourceTypeGroupConflict},
		{"DeleteResourceType", testDeleteResourceType},
		{"PluginConfigAndTypeAnnotations", testPluginConfigAndTypeAnnotations},
		{"CreateResource", testCreateResource},
		{"GetResourceNotFound", testGetResourceNotFound},
		{"ListResourcesFilters", testListResourcesFilters},
		{"ListResourcesPagination", testListResourcesPagination},
		{"ApplyResourceOutcomes", testApplyResourceOutcomes},
		{"ApplyResourceOwnerConflict", testApplyResourceOwnerConflict},
		{"ApplyResourceRevivesDeletion", testApplyResourceRevivesDeletion},
		{"ApplyResourceConcurrentUpdates", testApplyResourceConcurrentUpdates},
		{"ApplyResourceConcurrentCreate", testApplyResourceConcurrentCreate},
		{"StatusAndApplyConcurrently", testStatusAndApplyConcurrently},
		{"SetResourceStatus", testSetResourceStatus},
		{"Deletion", testDeletion},
		{"ApplyResources", testApplyResources},
		{"ApplyResourcesOwnerConflict", testApplyResourcesOwnerConflict},
		{"BulkDeletionsAndOwners", testBulkDeletionsAndOwners},
		{"LockSourceAndNotify", testLockSourceAndNotify},
		{"ListResourceDigests", testListResourceDigests},
		{"ReconcileHistory", testReconcileHistory},
		{"Sources", testSources},
		{"SyncHistory", testSyncHistory},
		{"TrimHistory", testTrimHistory},
		{"GenerationSpecs", testGenerationSpecs},
		{"TrimGenerationSpecs", testTrimGenerationSpecs},
		{"Agents", testAgents},
		{"LeaseSince", testLeaseSince},
		{"NoDriftFold", testNoDriftFold},
		{"SuspendResources", testSuspendResources},
		{"SuspendAnnotationTime", testSuspendAnnotationTime},
		{"SuspendSources", testSuspendSources},
		{"SuspendReasons", testSuspendReasons},
		{"ResourceStates", testResourceStates},
		{"NoticesRecorded", testNoticesRecorded},
		{"NoticeDelivery", testNoticeDelivery},
		{"RevisionRefused", testRevisionRefused},
		{"SourceChecked", testSourceChecked},
		{"InTxCommits", testInTxCommits},
		{"InTxRollsBack", testInTxRollsBack},
		{"Ping", testPing},
		{"ClaimDue", testClaimDue},
		{"ClaimConcurrently", testClaimConcurrently},
		{"LeaseFencing", testLeaseFencing},
		{"BatchComplete", testBatchComplete},
		{"BatchCompleteKeepsChanges", testBatchCompleteKeepsChanges},
		{"BatchErrOnly", testBatchErrOnly},
		{"BatchClaimConcurrently", testBatchClaimConcurrently},
		{"Handles", testHandles},
		{"CompleteSchedules", testCompleteSchedules},
		{"ManualRequest", testManualRequest},
		{"CompleteDeletion", testCompleteDeletion},
		{"WakeWaiters", testWakeWaiters},
		{"Listen", testListen},
		{"StatusEvents", testStatusEvents},
		{"StatusEventsOfBulkWrites", testStatusEventsOfBulkWrites},
		{"ChangeNotifications", testChangeNotifications},
		{"Fence", testFence},
		{"Stats", testStats},
		{"SourcePhases", testSourcePhases},
		{"DeleteSource", testDeleteSource},
		{"OrphanedNotDue", testOrphanedNotDue},
		{"PruneRemovesSource", testPruneRemovesSource},
		{"NewGenerationPending", testNewGenerationPending},
		{"TransitionTimes", testTransitionTimes},
		{"Namespaces", testNamespaces},
		{"NamespaceDependencies", testNamespaceDependencies},
		{"NamespaceRecords", testNamespaceRecords},
		{"DefaultNamespace", testDefaultNamespace},
		{"TypeScope", testTypeScope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}
