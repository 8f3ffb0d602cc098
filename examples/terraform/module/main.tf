# A module that needs no provider and no network: terraform_data stands in
# for real infrastructure. Each resource's spec becomes the variables; the
# agent adds no8s_kind, no8s_name and no8s_generation.

variable "no8s_name" { type = string }

variable "region" {
  type = string
}

variable "versioning" {
  type    = bool
  default = false
}

variable "retention_days" {
  type    = number
  default = 30
}

# A credential the module needs comes from the environment, through the
# instance's passEnv (TF_VAR_access_key); it is never in Git.
variable "access_key" {
  type      = string
  sensitive = true
  default   = "example-only"
}

resource "terraform_data" "bucket" {
  input = {
    name           = var.no8s_name
    region         = var.region
    versioning     = var.versioning
    retention_days = var.retention_days
  }
}

output "bucket_id" {
  value = terraform_data.bucket.id
}

output "url" {
  value = "https://${var.region}.storage.example.com/${var.no8s_name}"
}

output "signed_prefix" {
  value     = "${var.no8s_name}:${var.access_key}"
  sensitive = true
}
