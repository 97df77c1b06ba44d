// KServe's ServingRuntime (serving.kserve.io/v1alpha1) and InferenceService
// (serving.kserve.io/v1beta1), for check_manifests.js's strict field check.
// No npm package carries KServe's schemas, so these list the fields of
// KServe's API types (ServingRuntimeSpec, PredictorSpec, ModelSpec and the
// component extension fields) that a dmlserve manifest may use; the core
// types they embed (containers, volumes, tolerations, ...) are the
// Kubernetes ones from kubernetes-models. A field missing here fails the
// check: add it from KServe's API reference, not to silence a typo.
import type { IObjectMeta } from "@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta";
import type { IAffinity } from "kubernetes-models/v1/Affinity";
import type { IContainer } from "kubernetes-models/v1/Container";
import type { ILocalObjectReference } from "kubernetes-models/v1/LocalObjectReference";
import type { IPodSpec } from "kubernetes-models/v1/PodSpec";
import type { IToleration } from "kubernetes-models/v1/Toleration";
import type { IVolume } from "kubernetes-models/v1/Volume";

export type KServeProtocol = "v1" | "v2" | "grpc-v1" | "grpc-v2";

export interface IModelFormat {
  name: string;
  version?: string;
}

export interface ISupportedModelFormat extends IModelFormat {
  autoSelect?: boolean;
  priority?: number;
}

export interface IServingRuntime {
  apiVersion: "serving.kserve.io/v1alpha1";
  kind: "ServingRuntime";
  metadata: IObjectMeta;
  spec: {
    supportedModelFormats?: ISupportedModelFormat[];
    multiModel?: boolean;
    disabled?: boolean;
    protocolVersions?: KServeProtocol[];
    // ServingRuntimePodSpec, inline.
    containers: IContainer[];
    volumes?: IVolume[];
    nodeSelector?: { [key: string]: string };
    affinity?: IAffinity;
    tolerations?: IToleration[];
    labels?: { [key: string]: string };
    annotations?: { [key: string]: string };
    imagePullSecrets?: ILocalObjectReference[];
    hostIPC?: boolean;
    // ModelMesh only.
    grpcEndpoint?: string;
    grpcDataEndpoint?: string;
    httpDataEndpoint?: string;
    replicas?: number;
    storageHelper?: { disabled?: boolean };
  };
}

// ModelSpec: the model's format and runtime, PredictorExtensionSpec's fields,
// and a container's fields inline (merged into the runtime's
// kserve-container).
export type IModelSpec = Partial<IContainer> & {
  modelFormat: IModelFormat;
  runtime?: string;
  storageUri?: string;
  runtimeVersion?: string;
  protocolVersion?: KServeProtocol;
};

// ComponentExtensionSpec, inline in every component.
export interface IComponentExtension {
  minReplicas?: number;
  maxReplicas?: number;
  scaleTarget?: number;
  scaleMetric?: "cpu" | "memory" | "concurrency" | "rps";
  containerConcurrency?: number;
  timeout?: number;
  canaryTrafficPercent?: number;
  labels?: { [key: string]: string };
  annotations?: { [key: string]: string };
}

export type IPredictorSpec = Partial<IPodSpec> &
  IComponentExtension & {
    model?: IModelSpec;
  };

export interface IInferenceService {
  apiVersion: "serving.kserve.io/v1beta1";
  kind: "InferenceService";
  metadata: IObjectMeta;
  spec: {
    predictor: IPredictorSpec;
  };
}
