"""Seed 000's ``php-deployment``: a PhpDeployment brings up Deployment + Service + Ingress from a
Helm chart, with the image as a value, and the Helm operator keeps the release alive."""
