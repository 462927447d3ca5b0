// The umbrella module: `import ShadowKeys` brings in every ShadowKeys module.
@_exported public import ShadowCore
@_exported public import ShadowJOSE
@_exported public import ShadowJWKS
// The HTTP types of the transport protocol (HTTPFields, HTTPResponse.Status).
@_exported public import HTTPTypes
@_exported public import ShadowHTTP
@_exported public import ShadowApple
@_exported public import ShadowCrypto
@_exported public import ShadowVault
@_exported public import ShadowStorage
@_exported public import ShadowCredentials
@_exported public import ShadowServer
@_exported public import ShadowOperationLog
@_exported public import ShadowTokenSource
@_exported public import ShadowSessions
@_exported public import ShadowDPoP
