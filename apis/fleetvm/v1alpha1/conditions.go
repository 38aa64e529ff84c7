package v1alpha1

// Condition types of FleetVirtualMachine. All but Degraded are positive:
// True is good.
const (
	// ConditionReady: the VM is ready on every placed cluster.
	ConditionReady = "Ready"
	// ConditionPlaced: the placement decided enough clusters.
	ConditionPlaced = "Placed"
	// ConditionDelivered: the ApplicationSet exists and every decided
	// cluster has its Application.
	ConditionDelivered = "Delivered"
	// ConditionAvailable: the VM is ready on at least one cluster.
	ConditionAvailable = "Available"
	// ConditionDegraded: some cluster reports a failure or is unknown, a
	// removal could not be confirmed, or another FleetVirtualMachine
	// delivers the same VM. It is the one negative condition: True is bad.
	ConditionDegraded = "Degraded"
	// ConditionConfined: Argo CD applies what the FleetVirtualMachine
	// delivers as its namespace's ServiceAccount on each cluster (sync
	// impersonation), so the clusters' RBAC and KubeVirt's and CDI's clone
	// authorization confine what its git repository holds. False when Argo
	// CD's sync impersonation is off; Unknown when Argo CD's settings
	// cannot be read.
	ConditionConfined = "Confined"
)

// Condition types of FleetDiskImage.
const (
	// ConditionInUse: some VM on some cluster references the image.
	ConditionInUse = "InUse"
)

// Condition reasons.
const (
	ReasonReconciling         = "Reconciling"
	ReasonPlacementPending    = "PlacementPending"
	ReasonNoClusters          = "NoMatchingClusters"
	ReasonNotEnoughClusters   = "NotEnoughClusters"
	ReasonClustersDecided     = "ClustersDecided"
	ReasonApplicationSetReady = "ApplicationSetReady"
	ReasonApplicationsMissing = "ApplicationsMissing"
	ReasonDeliveryFailed      = "DeliveryFailed"
	ReasonAllReady            = "AllReady"
	ReasonSomeNotReady        = "SomeNotReady"
	ReasonNoneReady           = "NoneReady"
	ReasonStopped             = "Stopped"
	ReasonClustersUnknown     = "ClustersUnknown"
	ReasonClustersFailed      = "ClustersFailed"
	ReasonAsExpected          = "AsExpected"
	// ReasonNotEnoughReady: fewer clusters are placed than desired, so the
	// VM cannot be ready everywhere it should be.
	ReasonNotEnoughReady = "NotEnoughReady"
	// ReasonRemovalUnconfirmed: a VM FleetVM removed is still reported on
	// its cluster, or Argo CD cannot remove it.
	ReasonRemovalUnconfirmed = "RemovalUnconfirmed"
	// ReasonConflict: another FleetVirtualMachine delivers the same VM
	// (name and namespace); this one delivers nothing.
	ReasonConflict = "Conflict"
	// ReasonClusterSetsNotBound: no cluster set the FleetVirtualMachine
	// lists is bound to its namespace.
	ReasonClusterSetsNotBound = "ClusterSetsNotBound"
	// ReasonForbidden: the spec asks for something its namespace may not
	// use.
	ReasonForbidden = "Forbidden"
	// ReasonInvalidSpec: the spec breaks a rule admission checks (it got
	// past admission: webhook off or set to Ignore, created before the
	// rule existed, restored from a backup). Nothing new is placed or
	// delivered; the VMs already running stay.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonShapeLimitExceeded: the VM's shape would be one more than
	// its namespace may add to the shapes every cluster's agent scores.
	// Nothing new is placed or delivered; the VMs already running stay.
	ReasonShapeLimitExceeded = "ShapeLimitExceeded"
	// ReasonDeleting: the FleetVirtualMachine is being deleted.
	ReasonDeleting        = "Deleting"
	ReasonWaitingForImage = "WaitingForImage"
	ReasonReferenced      = "Referenced"
	ReasonUnreferenced    = "Unreferenced"
	ReasonImporting       = "Importing"
	ReasonImageReady      = "ImageReady"
	ReasonImageFailed     = "ImageFailed"
	// ReasonImpersonated: Argo CD syncs as the AppProject's destination
	// ServiceAccount (Confined True).
	ReasonImpersonated = "SyncImpersonated"
	// ReasonImpersonationOff: application.sync.impersonation.enabled is
	// not "true" in argocd-cm; Argo CD syncs with its own credentials on
	// each cluster (Confined False).
	ReasonImpersonationOff = "ImpersonationOff"
	// ReasonArgoCDSettingsUnknown: argocd-cm cannot be read (Confined
	// Unknown).
	ReasonArgoCDSettingsUnknown = "ArgoCDSettingsUnknown"
)
