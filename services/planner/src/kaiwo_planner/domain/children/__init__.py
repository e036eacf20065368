"""The child objects a KaiwoJob or KaiwoService needs (Jobs, RayJobs, Deployments, storage,
downloads) and the metadata every child carries."""
