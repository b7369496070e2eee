"""Component provider host for the spotgpu package (``PulumiPlugin.yaml``: runtime python).

The Pulumi CLI runs this file when a program in any language uses a spotgpu
component; the Python SDK's ``component_provider_host`` serves the components
of ``spotgpu_pulumi.package`` over gRPC, with the schema its analyzer infers.
"""

from importlib.metadata import PackageNotFoundError, version

from pulumi.provider.experimental import component_provider_host

from spotgpu_pulumi.package import COMPONENTS, PACKAGE_NAME


def _version() -> str:
    try:
        return version("spotgpu")
    except PackageNotFoundError:  # a bare checkout on PYTHONPATH
        return "0.1.0"


if __name__ == "__main__":
    component_provider_host(COMPONENTS, name=PACKAGE_NAME, version=_version())
